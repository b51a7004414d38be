"""Per-head RMSNorm of the query and key heads (Qwen3's q_norm and k_norm): the reference, seeded inputs, the
work model and where models call it.

q_out[t, h, :] = q[t, h, :] / sqrt(mean(q[t, h, :]^2) + eps) * wq, and the same for k with wk; fp32 math,
stored in q's dtype. Contract: benchmarks/operators/README.md; several outputs: OUTPUTS below.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import heads_holdout_dims, heads_interpreter_dims, outlier_activations, torch_dtype
from benchmarks.spec import Tolerance

NAME = "qk_rms_norm"
SIGNATURE = "qk_rms_norm(q[T,Hq,D], k[T,Hk,D], wq[D], wk[D], eps=1e-6) -> (q_out[T,Hq,D], k_out[T,Hk,D])"
ARGS = ("q", "k", "wq", "wk", "eps")
OUTPUTS = ("q_out", "k_out")
DESCRIPTION = (
    "The per-head RMSNorm Qwen3 applies to queries and keys before RoPE: for every token t and query head h, "
    "q_out[t, h, :] = q[t, h, :] / sqrt(mean over the D channels of q[t, h, :]^2 + eps) * wq, and for every "
    "key head k_out[t, h, :] = k[t, h, :] / sqrt(mean(k[t, h, :]^2) + eps) * wk. Each head is normalized on its "
    "own (heads differ in scale by up to 16x), and q and k have their own weights wq and wk ([D] each, "
    "different). q is [T, Hq, D] and k is [T, Hk, D] (Hq, Hk per-GPU head counts, Hk can be 1; D = 128 or 256 "
    "in the benchmark, not always a power of two in hold-outs); q, k, wq, wk share one dtype (bf16, fp16 or "
    "fp32); eps is a Python float (1e-6). Returns (q_out, k_out): two new contiguous tensors of q's and k's "
    "shapes and dtype. Load, compute in fp32, round once on the store. q and k may have token and head "
    "strides other than contiguous (views of a fused QKV output); the last stride is 1. Each head carries an "
    "outlier channel or two 20-100x larger. T is 1-256 in decode and thousands in prefill."
)

# One rounding of the output dtype from an fp32 result; rtol about two ulps (bf16 2^-8, fp16 2^-11); fp32
# allows the rsqrt approximation. Sharing one weight for q and k (the two differ by ~35% per channel) or
# normalizing over all heads of a token (heads differ in scale) fails every bound.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

DEFAULT_EPS = 1e-6
OUTLIER_SHARE = 0.01             # of D channels: one or two per head (a rounding of 1.28 or 2.56)
OUTLIER_SCALE = (20.0, 100.0)
HEAD_SCALE_LOG2 = 2.0            # each head scaled by 2^U(-2, 2): heads differ by up to 16x in RMS
WEIGHT_LOG_STD = 0.3             # wq, wk = exp(N(0, 0.3^2)) each: learned gains around 1, independent
HOLDOUT_MAX_T = 1 << 15
HOLDOUT_HEAD_DIMS = (80, 96, 192)


def _dims(dims) -> tuple[int, int, int, int]:
    T, Hq, Hk, D = (int(dims[k]) for k in ("T", "Hq", "Hk", "D"))
    if min(T, Hq, Hk, D) < 1:
        raise ValueError(f"{NAME}: dims T={T}, Hq={Hq}, Hk={Hk}, D={D} must all be >= 1")
    return T, Hq, Hk, D


def _heads(T: int, H: int, D: int, gen: torch.Generator, device) -> torch.Tensor:
    x = outlier_activations(T * H, D, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).view(T, H, D)
    scale = torch.exp2(HEAD_SCALE_LOG2 * (2 * torch.rand(H, generator=gen, device=device, dtype=torch.float32) - 1))
    return x * scale[None, :, None]


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, Hq, Hk, D = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    q, k = _heads(T, Hq, D, gen, device), _heads(T, Hk, D, gen, device)
    wq, wk = (torch.exp(WEIGHT_LOG_STD * torch.randn(2, D, generator=gen, device=device, dtype=torch.float32))).unbind(0)
    return {"q": q.to(tdt), "k": k.to(tdt), "wq": wq.to(tdt).contiguous(), "wk": wk.to(tdt).contiguous(),
            "eps": DEFAULT_EPS}


def _norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xd = x.double()
    return (xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + eps) * w.double()).to(x.dtype)


def reference(q, k, wq, wk, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    return _norm(q, wq, eps), _norm(k, wk, eps)


def baseline(q, k, wq, wk, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user runs instead: HF transformers' Qwen3RMSNorm as q_norm and k_norm (fp32 normalization,
    rounded to the activation dtype, then the weight multiply in that dtype)."""
    def norm(x, w):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return w * h.to(x.dtype)
    return norm(q, wq), norm(k, wk)


def baseline_liger(q, k, wq, wk, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """Liger-Kernel 0.8.5's RMSNorm (what its Qwen3 patch installs as q_norm and k_norm): two launches."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    return LigerRMSNormFunction.apply(q, wq, eps), LigerRMSNormFunction.apply(k, wk, eps)


def output_spec(dims, dtype: str) -> tuple[tuple[tuple[int, int, int], str], tuple[tuple[int, int, int], str]]:
    T, Hq, Hk, D = _dims(dims)
    torch_dtype(NAME, dtype)
    return ((T, Hq, D), dtype), ((T, Hk, D), dtype)


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 4 FLOPs per element (square, add, times rstd, times weight), fp32 peak. Q: q and k read once and
    written once, wq and wk read once."""
    T, Hq, Hk, D = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 4.0 * T * (Hq + Hk) * D}, float(2 * T * (Hq + Hk) * D * b + 2 * D * b)


def interpreter_dims(dims) -> dict[str, int]:
    _dims(dims)
    return heads_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return heads_holdout_dims(rng, hot_dims, HOLDOUT_HEAD_DIMS, HOLDOUT_MAX_T)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """One call per softmax-attention layer of a model with `qk_norm` (configs/models.yaml): Qwen3-30B-A3B and
    Qwen3-235B-A22B (every layer) and Qwen3-Next (its full-attention layers, 12 of 48; it stores the weight as
    1 + w, folded into w here), on the per-GPU heads (model_calls.attention_heads) of every token."""
    mc.check_call(NAME, tp, tokens)
    if not model_cfg.get("qk_norm"):
        return []
    hq, hk = mc.attention_heads(NAME, model_cfg, tp)
    dims = {"T": int(tokens), "Hq": hq, "Hk": hk, "D": int(model_cfg["head_dim"])}
    return [(dims, mc.full_attention_layers(model_cfg))]
