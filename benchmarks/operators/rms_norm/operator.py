"""RMSNorm over the hidden dimension: the reference, seeded inputs, the work model and where models call it.

y = x / sqrt(mean(x^2, -1) + eps) * weight, computed in fp32, stored in x's dtype.
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

from collections import Counter

import torch

from benchmarks.inputs import is_pow2, not_pow2, outlier_activations, torch_dtype
from benchmarks.spec import Tolerance

NAME = "rms_norm"
SIGNATURE = "rms_norm(x[T,H], weight[H], eps=1e-6) -> [T,H]"
ARGS = ("x", "weight", "eps")
DESCRIPTION = (
    "Root-mean-square normalization of each row of x (T tokens by H hidden channels), as before the "
    "attention and MLP blocks of Llama/Qwen/DeepSeek models: y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) "
    "* weight, with eps a Python float (1e-6 in the benchmark). x and weight share one dtype (bf16, fp16 or "
    "fp32); the output is a new contiguous [T, H] tensor in that dtype. Load the inputs, do all arithmetic "
    "(squares, the row sum, the reciprocal square root, both multiplications) in fp32 and round once on the "
    "store. x may have a row stride larger than H (a view into a wider buffer); weight is contiguous. "
    "Inputs carry a few outlier channels 20-100x larger than the rest, as real activations do: a sum of "
    "squares kept in fp16 overflows on them and fails the check. H is not always a power of two "
    "(e.g. 2880, 7168, odd hold-out sizes) and T ranges from 1 (decode) to thousands (prefill)."
)

# Output is rounded once from fp32; two honest kernels differ by reduction order (~1e-7 relative)
# plus at most one or two roundings of the output dtype (a kernel that, like vLLM, rounds x*rstd
# before the weight multiply rounds twice). bf16 ulp is 2^-8 relative, fp16 2^-11: rtol allows
# about two ulps. An fp16 sum of squares overflows (65504) on the outlier rows, giving 0 or inf
# rows and rel_l2 near 1, far outside every bound here.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

DEFAULT_EPS = 1e-6
OUTLIER_SHARE = 0.005            # share of channels that are outliers (at least one)
OUTLIER_SCALE = (20.0, 100.0)    # outlier channels are N(0,1) times a scale drawn from this range

_INTERP_MAX_T, _INTERP_MAX_H = 4, 256


def _dims(dims) -> tuple[int, int]:
    T, H = int(dims["T"]), int(dims["H"])
    if T < 1 or H < 1:
        raise ValueError(f"{NAME}: dims T={T}, H={H} must both be >= 1")
    return T, H


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(tdt)
    # Learned RMSNorm gains sit near 1; 1 + 0.1 N(0,1) is never zero in practice (a 10-sigma draw).
    weight = (1.0 + 0.1 * torch.randn(H, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    return {"x": x, "weight": weight, "eps": DEFAULT_EPS}


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)


def baseline(x: torch.Tensor, weight: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """What a user runs instead: the PyTorch RMSNorm of HF transformers' Llama (fp32 math, weight applied
    after the cast back). `aka bench --baseline eager|compile` times this."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def baseline_liger(x: torch.Tensor, weight: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Liger-Kernel's RMSNorm forward (`--baseline liger`), in its Llama casting mode (the math of
    `baseline`): one Triton kernel, plus the fp32 rstd per row it keeps for the backward pass."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction   # optional dependency, imported on use
    return LigerRMSNormFunction.apply(x, weight, eps, 0.0, "llama", False)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, H = _dims(dims)
    torch_dtype(NAME, dtype)
    return (T, H), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 4 FLOPs per element (square, add into the row sum, multiply by rstd, multiply by the weight);
    the per-row mean, eps add and rsqrt (3 per row) are left out as negligible next to 4*H.
    The arithmetic is fp32 on CUDA cores whatever the storage dtype, so W is counted against the
    fp32 peak (the bf16 peak is a tensor-core number elementwise code cannot reach).
    Q: x read once and y written once (T*H elements each) plus weight read once (H elements)."""
    T, H = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 4.0 * T * H}, float(2 * T * H * b + H * b)


def _scale_down(n: int, limit: int, not_pow2_size: int) -> int:
    """n if it already fits; otherwise `limit` for powers of two and a non-power-of-two size for the rest."""
    if n <= limit:
        return n
    return limit if is_pow2(n) else not_pow2_size


def interpreter_dims(dims) -> dict[str, int]:
    T, H = _dims(dims)
    # 192 + H % 64 stays in 192..255, which holds no power of two, and keeps H's oddness.
    return {"T": _scale_down(T, _INTERP_MAX_T, 3), "H": _scale_down(H, _INTERP_MAX_H, 192 + H % 64)}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes: a tiny odd T with an odd H near a hot H, a non-power-of-two T at a hot H,
    a T larger than every hot T, and an odd H larger than every hot H."""
    hot_T = sorted({int(d["T"]) for d in hot_dims}) or [1, 64, 4096]
    hot_H = sorted({int(d["H"]) for d in hot_dims}) or [4096]
    max_T, max_H = hot_T[-1], hot_H[-1]
    odd_near_hot = (rng.choice(hot_H) - 2 * rng.randrange(1, 32)) | 1
    return [
        {"T": rng.choice([3, 5, 7, 11, 13]), "H": max(odd_near_hot, 1)},
        {"T": not_pow2(rng.randrange(17, 2048)), "H": rng.choice(hot_H)},
        {"T": not_pow2(max_T + rng.randrange(1, max_T // 2 + 2)), "H": rng.choice(hot_H)},
        {"T": rng.choice([1, 2, 5]), "H": max_H + 2 * rng.randrange(1, 64) + 1},
    ]


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """Plain RMSNorm calls in one forward pass, as vLLM and SGLang run them. Norm weights are replicated under
    tensor parallelism, so every GPU normalizes full rows and `tp` does not change the shape. Over hidden_size:
    only layer 0's input norm, the one hidden norm without a residual to add; the other 2 x layers hidden norms
    fuse the residual add and are fused_add_rms_norm's. In an fp8 per-token deployment
    (`activation_quant: fp8_per_token`) that one norm also quantizes its output and is rms_norm_quant_fp8's.
    DeepSeek-V3 (MLA) adds q_a_layernorm over q_lora_rank and kv_a_layernorm over kv_lora_rank in every layer
    (no residual; its q_a/kv_a projections are replicated). Qwen3's per-head q/k norms are qk_rms_norm's.
    Models whose norm is LayerNorm (`norm: layer_norm`, Cohere's): none (layer_norm's)."""
    if tp < 1 or tokens < 1:
        raise ValueError(f"{NAME}.occurrences: tp={tp} and tokens={tokens} must both be >= 1")
    if model_cfg.get("norm") == "layer_norm":
        return []
    layers = int(model_cfg["num_hidden_layers"])
    counts: Counter = Counter()
    if model_cfg.get("activation_quant") != "fp8_per_token":
        counts[int(model_cfg["hidden_size"])] += 1
    for key in ("q_lora_rank", "kv_lora_rank"):
        if model_cfg.get(key):
            counts[int(model_cfg[key])] += layers
    return [({"T": int(tokens), "H": H}, n) for H, n in counts.items()]
