"""Gated RMSNorm (norm, then gate): the reference, seeded inputs, the work model and where models call it.

y = x / sqrt(mean(x^2, -1) + eps) * weight * silu(z), computed in fp32, stored in x's dtype.
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import outlier_activations, row_dims, row_holdout_dims, row_interpreter_dims, torch_dtype
from benchmarks.spec import Tolerance

NAME = "gated_rms_norm"
SIGNATURE = "gated_rms_norm(x[T,H], z[T,H], weight[H], eps=1e-6) -> [T,H]"
ARGS = ("x", "z", "weight", "eps")
DESCRIPTION = (
    "RMS normalization of each row of x followed by a SiLU gate from z, as on each value head of the Gated "
    "DeltaNet output in Qwen3-Next (H = 128, rows are tokens x heads): y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2)"
    " + eps) * weight * silu(z[t, :]), silu(a) = a / (1 + exp(-a)), eps a Python float (1e-6 in the "
    "benchmark). The norm comes first and the gate multiplies after it (not Mamba2's norm of x * silu(z)). "
    "x, z and weight share one dtype (bf16, fp16 or fp32); the output is a new contiguous [T, H] tensor in "
    "that dtype. Load, compute everything in fp32, round once on the store. x and z may have row strides "
    "larger than H. x carries a few outlier channels 20-100x larger than the rest; z is N(0, 2^2), so the "
    "gate is often near 0. H is not always a power of two (odd hold-out sizes); T ranges from a few rows "
    "to tens of thousands."
)

# One rounding of the output dtype from an fp32 result; rtol allows about two ulps (bf16 2^-8, fp16 2^-11);
# fp32 allows a fast exp in the gate. Skipping the weight (it is 1 +- 0.1) or gating before the norm
# changes outputs by ~10% and fails every bound.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

DEFAULT_EPS = 1e-6
OUTLIER_SHARE = 0.005
OUTLIER_SCALE = (20.0, 100.0)
GATE_STD = 2.0                   # z ~ N(0, GATE_STD^2): silu spans its negative dip and its linear part
HOLDOUT_MAX_T = 1 << 19


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = row_dims(NAME, dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(tdt)
    z = (GATE_STD * torch.randn(T, H, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    weight = (1.0 + 0.1 * torch.randn(H, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    return {"x": x, "z": z, "weight": weight, "eps": DEFAULT_EPS}


def reference(x, z, weight, eps: float = DEFAULT_EPS) -> torch.Tensor:
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float() * torch.nn.functional.silu(z.float())).to(x.dtype)


def baseline(x, z, weight, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """What a user runs instead: HF transformers' Qwen3NextRMSNormGated (fp32 norm, weight applied in the
    activation dtype, the gate in fp32)."""
    xf = x.float()
    h = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    h = weight * h.to(x.dtype)
    return (h * torch.nn.functional.silu(z.float())).to(x.dtype)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, H = row_dims(NAME, dims)
    torch_dtype(NAME, dtype)
    return (T, H), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 9 FLOPs per element: the RMSNorm's 4 (square, add, times rstd, times weight), silu's 4 (negate, exp,
    add, divide) and the gate multiply; fp32 peak (CUDA-core math). Q: x and z read once, y written once
    (T*H elements each), weight read once (H)."""
    T, H = row_dims(NAME, dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 9.0 * T * H}, float(3 * T * H * b + H * b)


def interpreter_dims(dims) -> dict[str, int]:
    return row_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, default_cols=128, max_rows=HOLDOUT_MAX_T)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """Gated RMSNorms in one forward pass, per GPU: one per Gated DeltaNet layer of a hybrid model
    (Qwen3-Next), over each value head of the delta rule's output: rows = tokens x linear_num_value_heads / tp
    (heads split over TP), H = linear_value_head_dim. Models without linear attention: none."""
    mc.check_call(NAME, tp, tokens)
    layers = mc.linear_attention_layers(model_cfg)
    if not layers:
        return []
    heads = mc.per_gpu(NAME, model_cfg["linear_num_value_heads"], tp, "linear_num_value_heads")
    return [({"T": int(tokens) * heads, "H": int(model_cfg["linear_value_head_dim"])}, layers)]
