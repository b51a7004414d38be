"""Dense GEMM of a linear layer: the reference, seeded inputs, the work model and where models call it.

gemm(a[M,K], b[N,K]) = a @ b.T: b is in nn.Linear weight layout (out_features x in_features), the
products accumulate in fp32 and the result is rounded once to a's dtype.
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

from collections import Counter

import torch

from benchmarks.inputs import BYTES, not_pow2, outlier_activations, torch_dtype
from benchmarks.spec import Tolerance

NAME = "gemm"
SIGNATURE = "gemm(a[M,K], b[N,K]) -> [M,N]"
ARGS = ("a", "b")
DESCRIPTION = (
    "Matrix product of a linear layer: out = a @ b.T, where a is the activation (M tokens by K input "
    "features, row-major) and b is the weight in nn.Linear layout (N output features by K input features, "
    "row-major, so the contraction runs over the contiguous dimension of both). a and b share one dtype "
    "(bf16, fp16 or fp32); the output is a new contiguous [M, N] tensor in that dtype. Accumulate in fp32 "
    "and round once on the store; for fp32 inputs the products must be true fp32 (tl.dot with "
    "input_precision='ieee' or 3xTF32), because plain TF32 (10-bit mantissa) fails the fp32 tolerance. "
    "M is the number of tokens in the batch: 1-256 in decode (memory-bound: the weight is streamed once, "
    "so keep enough programs and loads in flight), up to 16384 in prefill (compute-bound: large tiles, "
    "tensor cores, L2-friendly program order). N and K come from Llama, Qwen, DeepSeek, Mixtral and "
    "gpt-oss projections (e.g. 4096, 6144, 14336, 28672, 2880, 7168) and hold-out shapes use sizes that "
    "are not multiples of 16 or of any block size, so ragged edges in M, N and K must be masked. "
    "Activations carry a few outlier channels 20-100x larger than the rest, as real ones do."
)

# The reference multiplies exact products (bf16*bf16 and fp16*fp16 fit in fp32's mantissa) and sums in
# fp32 (fp64 for fp32 inputs), so an honest kernel differs from it by its summation order (~1e-6
# relative for fp32 sums) plus the final rounding: at most one ulp of the output dtype when the two
# round differently (bf16 2^-7 relative, fp16 2^-10). rtol allows about two ulps; atol covers outputs
# near zero. fp32: an honest fp32 kernel lands near 1e-6 rel_l2, while TF32 products (2^-11 relative
# rounding of each operand) give about 4e-4, four times over the bound: "fp32" means fp32.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=5e-3),
    "fp16": Tolerance(atol=4e-3, rtol=4e-3, rel_l2=1e-3),
    "fp32": Tolerance(atol=1e-3, rtol=1e-3, rel_l2=1e-4),
}

OUTLIER_SHARE = 0.002            # share of input channels that are outliers (at least one)
OUTLIER_SCALE = (20.0, 100.0)    # outlier channels are N(0,1) times a scale drawn from this range
HOLDOUT_MAX_M = 16384            # the large hold-out shape stays sane for one H200 (memory, minutes)

_INTERP_CAP = 64                 # M, N, K under the interpreter (a 64x64x64 fp32 tile is ~5 ms there)
# Used by holdout_dims when shapes.yaml is not generated yet: Llama-3.1-8B's qkv and down projections.
_FALLBACK_HOT = ({"M": 64, "N": 6144, "K": 4096}, {"M": 4096, "N": 4096, "K": 14336})


def _dims(dims) -> tuple[int, int, int]:
    M, N, K = int(dims["M"]), int(dims["N"]), int(dims["K"])
    if min(M, N, K) < 1:
        raise ValueError(f"{NAME}: dims M={M}, N={N}, K={K} must all be >= 1")
    return M, N, K


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    """a ~ N(0,1) with outlier channels; b ~ N(0, 1/K) (a trained linear layer's scale), so outputs are
    O(1) (a few units on rows the outliers dominate), never zero."""
    M, N, K = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    a = outlier_activations(M, K, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(tdt)
    # Drawn directly in the target dtype: a 57344x8192 weight in fp32 first would cost 1.9 GB more.
    b = torch.randn(N, K, generator=gen, device=device, dtype=tdt)
    b.mul_(K ** -0.5)
    return {"a": a, "b": b}


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    acc = torch.float64 if a.dtype == torch.float32 else torch.float32
    return (a.to(acc) @ b.to(acc).T).to(a.dtype)


def baseline(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What a user runs instead: torch.matmul in the operands' dtype (cuBLAS, fp32 accumulation)."""
    return a @ b.T


def baseline_cublas(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`--baseline cublas`: torch.matmul as shipped (cuBLAS/cuBLASLt picks its own Hopper kernel, TMA-fed
    and warp-specialized); the same call as `--baseline eager`, named for what it is."""
    return torch.matmul(a, b.T)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    M, N, _ = _dims(dims)
    torch_dtype(NAME, dtype)
    return (M, N), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 2*M*N*K (one multiply and one add per product), counted at the tensor-core peak of the dtype.
    Q: a, b read once and the output written once: (M*K + N*K + M*N) elements of the dtype."""
    M, N, K = _dims(dims)
    torch_dtype(NAME, dtype)
    b = BYTES[dtype]
    return {dtype: 2.0 * M * N * K}, float((M * K + N * K + M * N) * b)


def _scale_down(n: int, cap: int = _INTERP_CAP) -> int:
    """n if it fits; else a size below `cap` with n's residue mod 16, so odd stays odd and a size that is
    not a multiple of 16 (a ragged tile edge) stays one; multiples of 16 become `cap`."""
    if n <= cap:
        return n
    r = n % 16
    return cap - 16 + r if r else cap


def interpreter_dims(dims) -> dict[str, int]:
    M, N, K = _dims(dims)
    return {"M": _scale_down(M), "N": _scale_down(N), "K": _scale_down(K)}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes at the N and K of hot shapes: a small odd M with N and K that are not multiples
    of 16, a non-power-of-two decode M, a non-power-of-two prefill M with an odd K, and an M larger than
    every hot M (capped at 16384 tokens)."""
    hot = [_dims(d) for d in hot_dims] or [_dims(d) for d in _FALLBACK_HOT]
    max_M = max(m for m, _, _ in hot)

    def pick():
        _, n, k = rng.choice(hot)
        return n, k

    n1, k1 = pick()
    n2, k2 = pick()
    n3, k3 = pick()
    n4, k4 = pick()
    big_M = min(HOLDOUT_MAX_M, max_M + rng.randrange(1, max_M // 2 + 2))
    if big_M <= max_M:          # hot shapes already at the cap: still exceed them, by a ragged amount
        big_M = max_M + rng.randrange(1, 64)
    return [
        # max(1, ...): hot N can be as small as a router's expert count (8)
        {"M": rng.choice([1, 3, 5, 7, 9]), "N": max(1, n1 - 2 * rng.randrange(1, 8) + 1),
         "K": max(1, k1 - rng.randrange(1, 16))},
        {"M": not_pow2(rng.randrange(17, 256)), "N": n2, "K": k2},
        {"M": not_pow2(rng.randrange(300, 3000)), "N": n3 + 16 * rng.randrange(1, 4), "K": k3 + 2 * rng.randrange(1, 8) + 1},
        {"M": not_pow2(big_M), "N": n4, "K": k4},
    ]


def _div(n: int, tp: int, what: str) -> int:
    if n % tp:
        raise ValueError(f"{NAME}.occurrences: {what}={n} is not divisible by tp={tp}; pick a tp that divides it")
    return n // tp


def _attention_qkv_o(cfg: dict, tp: int) -> list[tuple[int, int]]:
    """Per-GPU (N, K) of the fused qkv and the output projection. KV heads are split over TP while there are
    enough of them and replicated beyond (vLLM keeps at least one KV head per GPU)."""
    heads, kv, hd, hidden = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]
    q_local = _div(heads, tp, "num_attention_heads")
    kv_local = max(1, kv // tp)
    return [((q_local + 2 * kv_local) * hd, hidden), (hidden, q_local * hd)]


def _mlp(hidden: int, inter_local: int) -> list[tuple[int, int]]:
    """Per-GPU (N, K) of the fused gate_up and the down projection of a SwiGLU MLP."""
    return [(2 * inter_local, hidden), (hidden, inter_local)]


def _num_experts(cfg: dict) -> int | None:
    for key in ("num_experts", "n_routed_experts", "num_local_experts"):
        if key in cfg:
            return int(cfg[key])
    return None


def _mla(cfg: dict, tp: int) -> list[tuple[int, int]]:
    """DeepSeek-V3 MLA projections per GPU: q_a and kv_a are replicated (their outputs are small latents),
    q_b and o are split over heads."""
    hidden, heads = cfg["hidden_size"], _div(cfg["num_attention_heads"], tp, "num_attention_heads")
    qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    return [(cfg["q_lora_rank"], hidden),                               # q_a
            (heads * qk, cfg["q_lora_rank"]),                           # q_b
            (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"], hidden),    # kv_a (latent + shared rope key)
            (hidden, heads * cfg["v_head_dim"])]                        # o


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """Dense linear layers of one forward pass on one GPU (M = tokens); the lm_head is left out.
    Llama-style dense models: qkv, o, gate_up, down in every layer. MoE models: qkv, o and the router
    gate (N = experts, replicated) in every layer; their experts are fused_moe's. DeepSeek-V3: the MLA
    projections (q_a, q_b, kv_a, o) in every layer, the dense MLP of its first `first_k_dense_replace`
    layers, and in each MoE layer the router gate and the shared expert's MLP (kv_b is absorbed into
    attention in decode and not counted). Identical dims are merged by summing their counts."""
    if tp < 1 or tokens < 1:
        raise ValueError(f"{NAME}.occurrences: tp={tp} and tokens={tokens} must both be >= 1")
    cfg = model_cfg
    layers, hidden = int(cfg["num_hidden_layers"]), int(cfg["hidden_size"])
    experts = _num_experts(cfg)
    counts: Counter = Counter()
    if "q_lora_rank" in cfg:
        dense = int(cfg.get("first_k_dense_replace", 0))
        moe_layers = layers - dense
        counts.update({nk: layers for nk in _mla(cfg, tp)})
        for nk in _mlp(hidden, _div(cfg["intermediate_size"], tp, "intermediate_size")):
            counts[nk] += dense
        shared = int(cfg.get("n_shared_experts", 0)) * int(cfg["moe_intermediate_size"])
        if shared:
            for nk in _mlp(hidden, _div(shared, tp, "shared expert intermediate size")):
                counts[nk] += moe_layers
        if experts:
            counts[(experts, hidden)] += moe_layers
    else:
        for nk in _attention_qkv_o(cfg, tp):
            counts[nk] += layers
        if experts:
            counts[(experts, hidden)] += layers
        else:
            for nk in _mlp(hidden, _div(cfg["intermediate_size"], tp, "intermediate_size")):
                counts[nk] += layers
    return [({"M": int(tokens), "N": int(n), "K": int(k)}, int(c)) for (n, k), c in counts.items() if c > 0]
