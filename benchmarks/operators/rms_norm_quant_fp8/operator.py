"""RMSNorm fused with dynamic per-token fp8 quantization: the reference, seeded inputs, the work model and where
models call it.

y = x / sqrt(mean(x^2) + eps) * weight in fp32; scale[t] = max(amax(|y[t, :]|) / 448, 1 / (448 * 512));
xq = e4m3fn(clamp(y / scale, +-448)). Contract: benchmarks/operators/README.md; the fp8 rules:
benchmarks/fp8_quant.py.
"""
from __future__ import annotations

import torch

from benchmarks import fp8_quant as fq
from benchmarks import model_calls as mc
from benchmarks.inputs import outlier_activations, row_dims, row_holdout_dims, row_interpreter_dims, torch_dtype
from benchmarks.spec import Tolerance

NAME = "rms_norm_quant_fp8"
SIGNATURE = ("rms_norm_quant_fp8(x[T,H], weight[H], eps=1e-6) -> (xq[T,H] float8_e4m3fn, scale[T] fp32)")
ARGS = ("x", "weight", "eps")
OUTPUTS = ("xq", "scale")
DESCRIPTION = (
    "RMSNorm followed by dynamic per-token fp8 quantization in one pass, feeding an fp8 W8A8 GEMM (vLLM's "
    "rms_norm_dynamic_per_token_quant): x is [T, H] and weight [H] (one dtype: bf16/fp16/fp32; x's row "
    "stride may exceed H), eps a Python float (1e-6 in the benchmark). In fp32 throughout (the normalized "
    "row is never rounded to x's dtype): y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * weight; "
    "scale[t] = max(amax_t / 448, 1 / (448 * 512)) with amax_t = max |y[t, :]| (448 is float8_e4m3fn's "
    "largest value; the floor keeps an all-zero padding row at scale 1/229376 and zeros instead of 0 / 0); "
    "xq[t, h] = y[t, h] / scale[t], clamped to [-448, 448] and rounded to the nearest float8_e4m3fn value "
    "(ties to even; on a GPU `.to(tl.float8e4nv)` does exactly that). Return (xq, scale): xq a new "
    "contiguous [T, H] torch.float8_e4m3fn tensor, scale a new contiguous [T] fp32 tensor. Checked: every "
    "scale within 1e-5 relative (reduction order and rsqrt); every xq equal to the reference's, or one "
    "e4m3fn step away only where y / scale sits within 2^-18 of a rounding midpoint. Note amax(|y|) = rstd "
    "* amax(|x * weight|), and rstd cancels in y / scale. Inputs carry outlier channels 20-100x larger than "
    "the rest and one all-zero row. H is not always a power of two; T ranges from 1 to "
    "thousands."
    " " + fq.INTERPRETER_NOTE
)

# The fp8 envelope is one e4m3fn step (benchmarks/fp8_quant.py argues the bound); `check` is the exact rule.
# Scales carry the RMS: another reduction order or an approximate rsqrt moves them by ~1e-6 relative, as
# rms_norm's fp32 outputs (same 1e-5 bound). A norm rounded to bf16 before the quantization moves them by up
# to 2^-9 and fails.
TOLERANCES = {
    "fp8": fq.FP8_TOLERANCE,
    "fp32": Tolerance(atol=0.0, rtol=1e-5, rel_l2=1e-5),
}
SCALE_RTOL = TOLERANCES["fp32"].rtol
SLACK = 2.0 ** -18               # y / scale passes the rstd, weight and scale roundings (benchmarks/fp8_quant.py)

DEFAULT_EPS = 1e-6
OUTLIER_SHARE = 0.005
OUTLIER_SCALE = (20.0, 100.0)


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = row_dims(NAME, dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = fq.with_padding_row(outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE), gen)
    weight = 1.0 + 0.1 * torch.randn(H, generator=gen, device=device, dtype=torch.float32)
    return {"x": x.to(tdt), "weight": weight.to(tdt), "eps": DEFAULT_EPS}


def _normalized(x, weight, eps: float, dtype=torch.float32) -> torch.Tensor:
    xf = x.to(dtype)
    return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.to(dtype)


def _scales(y: torch.Tensor) -> torch.Tensor:
    return (y.abs().amax(dim=-1) / fq.FP8_MAX).clamp_min(fq.PER_TOKEN_MIN_SCALE)


def reference(x, weight, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    y = _normalized(x, weight, eps)
    scale = _scales(y).float()
    return fq.quantize(y, scale[:, None]), scale


def baseline(x, weight, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user runs instead in PyTorch: the model's RMSNorm math and then vLLM's QuantFP8 native path
    (amax, floor, y * (1 / scale)), unfused. The normalized row stays fp32: HF Llama rounds it to x's dtype
    first, which moves the scales by up to 2^-9 relative, outside this operator's contract."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    scale = (y.abs().amax(dim=-1, keepdim=True) / fq.FP8_MAX).clamp_min(fq.PER_TOKEN_MIN_SCALE)
    return (y * scale.reciprocal()).clamp(-fq.FP8_MAX, fq.FP8_MAX).to(fq.FP8_DTYPE), scale.reshape(-1)


def check(inputs, outputs, reference_outputs) -> str | None:
    (xq, scale), (xq_ref, scale_ref) = outputs, reference_outputs
    y = _normalized(inputs["x"], inputs["weight"], float(inputs["eps"]), torch.float64)
    unrounded = y / scale_ref.double()[:, None]
    return fq.quant_problem(xq, scale, xq_ref, scale_ref, unrounded, SCALE_RTOL, "row", SLACK)


def output_spec(dims, dtype: str):
    T, H = row_dims(NAME, dims)
    torch_dtype(NAME, dtype)
    return ((T, H), "fp8"), ((T,), "fp32")


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 6 FLOPs per element: RMSNorm's 4 (square, add, times rstd, times weight), the max of |y| into the
    amax and the division by the scale; fp32 on CUDA cores. Q: x read once, weight once, xq written once
    (1 byte an element), one fp32 scale per row."""
    T, H = row_dims(NAME, dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 6.0 * T * H}, float(T * H * b + H * b + T * H + 4 * T)


def interpreter_dims(dims) -> dict[str, int]:
    return row_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, default_cols=8192)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """Calls in one forward pass, per GPU, of an fp8 W8A8 deployment with dynamic per-token activation scales
    (`activation_quant: fp8_per_token`: llama-3.1-70b-fp8), modelled as vLLM runs it with its RMSNorm+quant
    fusion: the one norm without a residual add, the first layer's input norm, becomes this kernel over
    [T, hidden] (norm weights are replicated under TP). The other 2L - 1 norms add the residual first
    (fused_add_rms_norm + quant, another kernel); the final norm feeds the bf16 lm_head. Other models: none."""
    mc.check_call(NAME, tp, tokens)
    if model_cfg.get("activation_quant") != "fp8_per_token":
        return []
    return [({"T": int(tokens), "H": int(model_cfg["hidden_size"])}, 1)]
