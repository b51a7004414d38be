"""Fused mixture-of-experts MLP: the reference, seeded inputs with router-like routing, the work model
and where models call it.

out[t] = sum_j topk_weights[t, j] * (silu(x_t g_e^T) * (x_t u_e^T)) w2[e]^T with e = topk_ids[t, j],
g_e = w1[e, :I] (gate rows), u_e = w1[e, I:] (up rows). Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

from functools import lru_cache

import torch

from benchmarks.inputs import BYTES, is_pow2, not_pow2, torch_dtype
from benchmarks.spec import Tolerance

NAME = "fused_moe"
SIGNATURE = ("fused_moe(hidden[T,H], w1[E,2I,H], w2[E,H,I], topk_weights[T,k] fp32, topk_ids[T,k] int32) "
             "-> [T,H]")
ARGS = ("hidden", "w1", "w2", "topk_weights", "topk_ids")
DESCRIPTION = (
    "The expert MLPs of a mixture-of-experts layer, after the router has chosen k distinct experts per "
    "token: out[t] = sum over j < k of topk_weights[t, j] * (silu(x_t @ g_e.T) * (x_t @ u_e.T)) @ w2[e].T, "
    "where x_t = hidden[t], e = topk_ids[t, j], g_e = w1[e, :I] (gate projection) and u_e = w1[e, I:] "
    "(up projection). hidden is [T, H]; w1 is [E, 2I, H] and w2 is [E, H, I], both contiguous in "
    "nn.Linear layout; topk_weights is [T, k] fp32 (each row sums to 1) and topk_ids is [T, k] int32 with "
    "k distinct experts per row. hidden, w1 and w2 share one dtype (bf16, fp16 or fp32); the output is a "
    "new contiguous [T, H] tensor in that dtype. Accumulate in fp32; rounding the silu*up intermediate "
    "and each pair's weighted expert output to the activation dtype (as vLLM does) is within tolerance; "
    "for fp32 inputs use true fp32 products (input_precision='ieee'), not TF32. Routing is uneven, like a "
    "real router's: some experts get several times the average number of tokens, some get none. "
    "No host synchronization (.item(), .tolist(), .cpu()) and no data-dependent allocation: the call "
    "must be capturable in a CUDA graph, so launch grids use upper bounds and surplus programs exit. "
    "T is 1-256 in decode (memory-bound: stream only the selected experts' weights, once) and up to "
    "16384 in prefill (compute-bound: grouped GEMMs over tokens sorted by expert). Shapes come from "
    "Qwen3-30B-A3B (H=2048, I=768, E=128, k=8), Qwen3-235B, DeepSeek-V3 (H=7168, E=256, k=8), "
    "Mixtral-8x7B (E=8, k=2) and gpt-oss-120b (H=2880, E=128, k=4); hold-out shapes use odd token counts "
    "and intermediate sizes that are not multiples of 16."
)

# Measured on CPU against an fp64 reference (H=2048, I=768, E=16, k=4, T=512, these inputs): a
# vLLM-like bf16 kernel that rounds the silu*up intermediate and each pair's weighted output to bf16
# differs from this reference by rel_l2 3.2e-3 and at most 0.125 (one bf16 ulp of outputs in [16, 32):
# outlier channels make outputs reach ~30); fp16: 4.0e-4 and 0.016. The bounds leave about 3x (bf16)
# and 5x (fp16) of room on rel_l2 and twice the worst element seen, so bigger T (more elements, rarer
# extremes) still passes; a dropped or misrouted expert changes outputs by O(1) and fails both checks.
# fp32: an honest fp32 kernel is near 1e-6; TF32 products (about 4e-4 per GEMM) fail rel_l2.
# Why a scale: the element bound is atol + rtol * max(|ref|, scale), scale[t, h] = sum_j |w_j y_j[h]|
# (reference_with_scale, computed with the reference). A kernel that rounds each of the k weighted
# partials to bf16 (vLLM, the seed) errs in proportion to the partials, not to their sum: on the H200 an
# honest kernel failed a hold-out (about 1 evaluation in 6) with rel_l2 0.0033 and one element off by 0.5,
# where outlier-driven partials of 30-100 (bf16 steps 0.125-0.5) cancelled to 0.74. Against |ref| alone
# that is luck; against the summands it is well inside 0.25 + 0.02 * ~100. rel_l2 stays global. A dropped
# expert, a misrouted token or a wrong weight moves elements by a whole summand, more than 2% of the
# summands' total wherever that summand is not tiny: one pair of one token lost at k=2, or the smallest
# of k=8 lost on 4 tokens, still fails the element bound (tests/benchmarks/test_op_fused_moe.py).
TOLERANCES = {
    "bf16": Tolerance(atol=0.25, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=4e-2, rtol=4e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-3, rtol=1e-3, rel_l2=1e-4),
}

OUTLIER_SHARE = 0.002            # share of hidden channels that are outliers (at least one)
OUTLIER_SCALE = (20.0, 100.0)    # outlier channels are N(0,1) times a scale drawn from this range
# Router logits = N(0,1) noise per (token, expert) + a per-expert bias ~ N(0, ROUTER_SKEW^2) drawn per
# seed. 0.2 gives the busiest expert about 3x the average load and the idlest about 0.25x at E=128-256
# (1.5x / 0.5x at E=8), the imbalance of real routers within a batch.
ROUTER_SKEW = 0.2
# Expected distinct experts (for Q): selection probabilities estimated from this many routed tokens,
# for each of these fixed bias draws (seeds), on the CPU. Deterministic; about 0.1 s per (E, k), cached.
DISTINCT_SAMPLE_TOKENS = 4096
DISTINCT_SEEDS = tuple(range(1000, 1008))
HOLDOUT_MAX_T = 16384            # the large hold-out shape stays sane for one H200
_REFERENCE_GROUP_ELEMENTS = 1 << 28   # temporaries of one expert group in reference() (1 GiB in fp32)

_INTERP_MAX = {"T": 8, "H": 64, "I": 32, "E": 8}
# Used by holdout_dims when shapes.yaml is not generated yet: Qwen3-30B-A3B decode and prefill.
_FALLBACK_HOT = ({"T": 64, "H": 2048, "I": 768, "E": 128, "k": 8}, {"T": 4096, "H": 2048, "I": 768, "E": 128, "k": 8})


def _dims(dims) -> tuple[int, int, int, int, int]:
    T, H, I, E, k = (int(dims[n]) for n in ("T", "H", "I", "E", "k"))
    if min(T, H, I, E, k) < 1:
        raise ValueError(f"{NAME}: dims T={T}, H={H}, I={I}, E={E}, k={k} must all be >= 1")
    if k > E:
        raise ValueError(f"{NAME}: k={k} experts per token exceeds E={E}; the router picks k distinct experts")
    return T, H, I, E, k


def route(T: int, E: int, k: int, gen: torch.Generator, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Router-like routing: top-k of skewed random logits (k distinct experts per token, by descending
    logit) and their softmax as fp32 weights (each row sums to 1). Returns (topk_weights, topk_ids int32)."""
    bias = ROUTER_SKEW * torch.randn(E, generator=gen, device=device, dtype=torch.float32)
    logits = torch.randn(T, E, generator=gen, device=device, dtype=torch.float32) + bias
    top, ids = torch.topk(logits, k, dim=1)
    return torch.softmax(top, dim=1).contiguous(), ids.to(torch.int32).contiguous()


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    """hidden ~ N(0,1) with outlier channels; w1 ~ N(0, 1/H) and w2 ~ N(0, 1/I) (trained layers' scale),
    so expert outputs are O(1) (tens on rows the outliers dominate), never zero; routing from route()."""
    T, H, I, E, k = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    hidden = torch.randn(T, H, generator=gen, device=device, dtype=torch.float32)
    n_out = max(1, round(OUTLIER_SHARE * H))
    channels = torch.randperm(H, generator=gen, device=device)[:n_out]
    lo, hi = OUTLIER_SCALE
    hidden[:, channels] *= lo + (hi - lo) * torch.rand(n_out, generator=gen, device=device, dtype=torch.float32)
    # Weights drawn directly in the target dtype: DeepSeek-V3's w1 is 0.9 G elements per GPU.
    w1 = torch.randn(E, 2 * I, H, generator=gen, device=device, dtype=tdt).mul_(H ** -0.5)
    w2 = torch.randn(E, H, I, generator=gen, device=device, dtype=tdt).mul_(I ** -0.5)
    topk_weights, topk_ids = route(T, E, k, gen, device)
    return {"hidden": hidden.to(tdt), "w1": w1, "w2": w2, "topk_weights": topk_weights, "topk_ids": topk_ids}


def reference(hidden, w1, w2, topk_weights, topk_ids) -> torch.Tensor:
    """Upcast to fp32 (fp64 for fp32 inputs) for both matmuls; the silu*up intermediate stays in the
    accumulation dtype (not rounded to the activation dtype: the tolerances absorb kernels that round it).
    The computation is _reference's (below)."""
    return _reference(hidden, w1, w2, topk_weights, topk_ids, with_scale=False)[0]


def reference_with_scale(hidden, w1, w2, topk_weights, topk_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """(reference's output, scale): scale[t, h] = sum_j |topk_weights[t, j] * y_j[t, h]| in fp32, the
    magnitudes of the k summands a kernel may round to the activation dtype before adding them (vLLM's
    bf16 partials). The gate bounds each element by atol + rtol * max(|ref|, scale) (see TOLERANCES).
    Same pass as the reference: one abs and one index_add_ per expert group more, no extra matmul."""
    out, scale = _reference(hidden, w1, w2, topk_weights, topk_ids, with_scale=True)
    return out, scale.float()


def _reference(hidden, w1, w2, topk_weights, topk_ids, with_scale: bool):
    """(output in the activation dtype, scale in the accumulation dtype or None).

    Experts go in groups through batched matmuls: each expert's (token, slot) pairs are the rows of its
    zero-padded batch entry (padding rows are computed and never read). One expert at a time, E=256 cost
    about 0.3 s a call on the H200 (some 4000 small launches), most of a fused_moe evaluation's reference
    time; a group's temporaries stay under _REFERENCE_GROUP_ELEMENTS elements."""
    acc = torch.float64 if hidden.dtype == torch.float32 else torch.float32
    T, H = hidden.shape
    E, I, k = w1.shape[0], w1.shape[1] // 2, topk_ids.shape[1]
    x = hidden.to(acc)
    out = torch.zeros(T, H, dtype=acc, device=hidden.device)
    scale = torch.zeros(T, H, dtype=acc, device=hidden.device) if with_scale else None
    # (token, slot) pairs grouped by expert, ascending (token, slot) within one: one host sync for the counts
    flat = topk_ids.long().reshape(-1)
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=E).tolist()
    first = [0]
    for n in counts:
        first.append(first[-1] + n)
    expert = flat[order]
    rank = torch.arange(order.numel(), device=hidden.device) - torch.tensor(first[:-1], device=hidden.device)[expert]
    tok, slot = order // k, order % k

    def per_expert(rows: int) -> int:         # elements of one batch entry: its rows in and out, gate_up, weights
        return 2 * rows * H + 2 * rows * I + 3 * I * H

    e0 = 0
    while e0 < E:
        cap = max(counts[e0], 1)
        e1 = e0 + 1
        while e1 < E and (e1 + 1 - e0) * per_expert(max(cap, counts[e1])) <= _REFERENCE_GROUP_ELEMENTS:
            cap = max(cap, counts[e1])
            e1 += 1
        p0, p1 = first[e0], first[e1]
        if p1 > p0:
            ex, rk, tk, sl = expert[p0:p1] - e0, rank[p0:p1], tok[p0:p1], slot[p0:p1]
            batch = torch.zeros(e1 - e0, cap, H, dtype=acc, device=hidden.device)
            batch[ex, rk] = x[tk]
            gate_up = torch.bmm(batch, w1[e0:e1].to(acc).transpose(1, 2))
            act = torch.nn.functional.silu(gate_up[..., :I]) * gate_up[..., I:]
            y = torch.bmm(act, w2[e0:e1].to(acc).transpose(1, 2))[ex, rk]
            weighted = y * topk_weights[tk, sl].to(acc)[:, None]
            out.index_add_(0, tk, weighted)
            if scale is not None:
                scale.index_add_(0, tk, weighted.abs_())      # in place: `weighted` is not read again
        e0 = e1
    return out.to(hidden.dtype), scale


def baseline(hidden, w1, w2, topk_weights, topk_ids) -> torch.Tensor:
    """What a user runs instead: the per-expert PyTorch loop in the activation dtype (cuBLAS matmuls).
    It reads the routing on the host (nonzero), as such loops do, so it cannot be graph-captured."""
    T, H = hidden.shape
    I = w1.shape[1] // 2
    out = torch.zeros(T, H, dtype=torch.float32, device=hidden.device)
    for e in range(w1.shape[0]):
        tok, slot = (topk_ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        gate_up = hidden[tok] @ w1[e].T
        act = torch.nn.functional.silu(gate_up[:, :I]) * gate_up[:, I:]
        out.index_add_(0, tok, (act @ w2[e].T).float() * topk_weights[tok, slot][:, None])
    return out.to(hidden.dtype)


def baseline_liger(hidden, w1, w2, topk_weights, topk_ids) -> torch.Tensor:
    """Liger-Kernel's fused MoE forward (`--baseline liger`): the same weight layout (w1 [E, 2I, H], gate
    rows first; w2 [E, H, I]). Written for training: token tiles fixed at 64 rows; its GEMMs autotune once
    per (H, I), at the first call's T, and keep that config for every later T (Triton's autotune key), as in
    a user's process, so a measurement walking the hot shapes tunes at the first shape of each (H, I); one
    host sync (.item()) for the tile count, so it cannot be graph-captured and is timed with eager launches
    (host time included). For fused_moe, `--baseline cublas` has no counterpart: cuBLAS has no routed
    grouped GEMM; the per-expert loop on cuBLAS is `--baseline eager`."""
    from liger_kernel.ops.fused_moe import LigerFusedMoEFunction   # optional dependency, imported on use
    return LigerFusedMoEFunction.apply(hidden, w1, w2, topk_ids, topk_weights)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, H, _, _, _ = _dims(dims)
    torch_dtype(NAME, dtype)
    return (T, H), dtype


@lru_cache(maxsize=None)
def _selection_probabilities(E: int, k: int) -> tuple[tuple[float, ...], ...]:
    """Per fixed bias draw: each expert's probability of being among one token's k (route() on the CPU)."""
    probs = []
    for seed in DISTINCT_SEEDS:
        gen = torch.Generator().manual_seed(seed)
        _, ids = route(DISTINCT_SAMPLE_TOKENS, E, k, gen, "cpu")
        counts = torch.bincount(ids.flatten().long(), minlength=E).double() / DISTINCT_SAMPLE_TOKENS
        probs.append(tuple(counts.tolist()))
    return tuple(probs)


def expected_distinct_experts(T: int, E: int, k: int) -> float:
    """Expected number of distinct experts route() selects for T tokens. Given the expert biases, tokens
    choose independently, so E[distinct] = sum_e 1 - (1 - p_e)^T; p_e is estimated on the CPU from
    DISTINCT_SAMPLE_TOKENS tokens for each of DISTINCT_SEEDS' bias draws and the result averaged over them.
    T=1 gives exactly k. Skewed routing selects fewer experts than uniform routing's E(1 - (1 - k/E)^T),
    so a kernel streaming only the selected experts at full bandwidth lands at, not above, the roofline."""
    if T < 1 or not 1 <= k <= E:
        raise ValueError(f"{NAME}: expected_distinct_experts needs T >= 1 and 1 <= k <= E; got T={T}, E={E}, k={k}")
    draws = _selection_probabilities(E, k)
    return sum(sum(1.0 - (1.0 - p) ** T for p in ps) for ps in draws) / len(draws)


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: the semantic matmul FLOPs, 2*T*k*(2I*H) (gate and up) + 2*T*k*(I*H) (down), at the dtype's
    tensor-core peak. The elementwise work (silu*up ~5*T*k*I, weighting and k-sum 2*T*k*H) is under 0.1%
    of that and left out.
    Q: hidden read once (T*H), the weights of the distinct experts the routing selects (D*(2I*H + H*I),
    D = expected_distinct_experts(T, E, k)), topk weights and ids (T*k*(4+4) bytes) and the output
    written once (T*H)."""
    T, H, I, E, k = _dims(dims)
    torch_dtype(NAME, dtype)
    b = BYTES[dtype]
    flops = 2.0 * T * k * (2 * I * H) + 2.0 * T * k * (I * H)
    distinct = expected_distinct_experts(T, E, k)
    Q = T * H * b + distinct * (2 * I * H + H * I) * b + T * k * (4 + 4) + T * H * b
    return {dtype: flops}, float(Q)


def _scale_down(n: int, cap: int) -> int:
    """n if it fits; else a size below `cap` with n's residue mod 16 (odd stays odd, a size that is not a
    multiple of 16 stays one); multiples of 16 become `cap`."""
    if n <= cap:
        return n
    r = n % 16
    return cap - 16 + r if r else cap


def interpreter_dims(dims) -> dict[str, int]:
    """T <= 8 (odd stays odd, non-powers of two stay so), H <= 64, I <= 32, E <= 8 and k <= E/2, so that
    some experts get no token, as at the real shapes."""
    T, H, I, E, k = _dims(dims)
    if T > _INTERP_MAX["T"]:
        T = 8 if is_pow2(T) else (7 if T % 2 else 6)
    E = min(E, _INTERP_MAX["E"])
    return {"T": T, "H": _scale_down(H, _INTERP_MAX["H"]), "I": _scale_down(I, _INTERP_MAX["I"]),
            "E": E, "k": min(k, max(1, E // 2))}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes at the (H, I, E, k) of hot shapes: a small odd T, a non-power-of-two T in
    decode and one in prefill range, an odd T with an intermediate size that is not a multiple of 16,
    and a T larger than every hot T (capped at 16384 tokens)."""
    hot = [dict(zip(("T", "H", "I", "E", "k"), _dims(d))) for d in hot_dims] or [dict(d) for d in _FALLBACK_HOT]
    max_T = max(d["T"] for d in hot)

    def at(T: int, **override) -> dict[str, int]:
        d = dict(rng.choice(hot))
        d.update(T=T, **override)
        return d

    big_T = min(HOLDOUT_MAX_T, max_T + rng.randrange(1, max_T // 2 + 2))
    if big_T <= max_T:          # hot shapes already at the cap: still exceed them, by a ragged amount
        big_T = max_T + rng.randrange(1, 64)
    ragged = dict(rng.choice(hot))
    ragged_I = ragged["I"] - 8 if ragged["I"] > 16 else ragged["I"] + 8
    return [
        at(rng.choice([3, 5, 7, 9, 11, 13])),
        at(not_pow2(rng.randrange(17, 256))),
        {**ragged, "T": 2 * rng.randrange(8, 128) + 1, "I": ragged_I},
        at(not_pow2(rng.randrange(300, 3000))),
        at(not_pow2(big_T)),
    ]


def _num_experts(cfg: dict) -> int | None:
    for key in ("num_experts", "n_routed_experts", "num_local_experts"):
        if key in cfg:
            return int(cfg[key])
    return None


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """One call per MoE layer (T = tokens). Experts are split over TP by their intermediate size (each GPU
    holds every expert's I/tp slice): I = moe_intermediate_size / tp, or intermediate_size / tp where the
    config has no separate expert size (Mixtral, gpt-oss). DeepSeek-V3's first `first_k_dense_replace`
    layers are dense. Dense models: none."""
    if tp < 1 or tokens < 1:
        raise ValueError(f"{NAME}.occurrences: tp={tp} and tokens={tokens} must both be >= 1")
    E = _num_experts(model_cfg)
    if E is None:
        return []
    inter = int(model_cfg["moe_intermediate_size"] if "moe_intermediate_size" in model_cfg
                else model_cfg["intermediate_size"])
    if inter % tp:
        raise ValueError(f"{NAME}.occurrences: expert intermediate size {inter} is not divisible by tp={tp}; "
                         f"pick a tp that divides it")
    layers = int(model_cfg["num_hidden_layers"]) - int(model_cfg.get("first_k_dense_replace", 0))
    dims = {"T": int(tokens), "H": int(model_cfg["hidden_size"]), "I": inter // tp, "E": E,
            "k": int(model_cfg["num_experts_per_tok"])}
    return [(dims, layers)] if layers > 0 else []
