"""Dynamic per-token fp8 quantization: the reference, seeded inputs, the work model and where models call it.

scale[t] = max(amax(|x[t, :]|) / 448, 1 / (448 * 512)); xq[t, :] = e4m3fn(clamp(x[t, :] / scale[t], +-448)).
Contract: benchmarks/operators/README.md; the fp8 rules: benchmarks/fp8_quant.py.
"""
from __future__ import annotations

from collections import Counter

import torch

from benchmarks import fp8_quant as fq
from benchmarks import model_calls as mc
from benchmarks.inputs import outlier_activations, row_dims, row_holdout_dims, row_interpreter_dims, torch_dtype
from benchmarks.spec import Tolerance

NAME = "per_token_quant_fp8"
SIGNATURE = "per_token_quant_fp8(x[T,H]) -> (xq[T,H] float8_e4m3fn, scale[T] fp32)"
ARGS = ("x",)
OUTPUTS = ("xq", "scale")
DESCRIPTION = (
    "Dynamic per-token fp8 quantization of activations ahead of an fp8 W8A8 GEMM (vLLM's "
    "dynamic_per_token_scaled_fp8_quant): for each row t of x (T tokens by H channels, bf16/fp16/fp32, row "
    "stride may exceed H), scale[t] = max(amax_t / 448, 1 / (448 * 512)) with amax_t = max |x[t, :]| in fp32 "
    "(448 is float8_e4m3fn's largest value; the floor keeps an all-zero padding row at scale 1/229376 and "
    "zeros instead of 0 / 0), and xq[t, h] = x[t, h] / scale[t] in fp32, clamped to [-448, 448] and rounded "
    "to the nearest float8_e4m3fn value (ties to even; on a GPU `.to(tl.float8e4nv)` does exactly that). "
    "Return (xq, scale): xq a new contiguous [T, H] torch.float8_e4m3fn tensor, scale a new contiguous [T] "
    "fp32 tensor. Checked: every scale within 1e-6 relative; every xq equal to the reference's, or one "
    "e4m3fn step away only where x / scale sits within 2^-20 of a rounding midpoint (another valid fp32 "
    "rounding, such as x * (1 / scale)). Inputs carry outlier channels 20-100x larger than the rest and one "
    "all-zero row. H is not always a power of "
    "two; T ranges from 1 (decode) to thousands (prefill)."
    " " + fq.INTERPRETER_NOTE
)

# The fp8 envelope is one e4m3fn step (benchmarks/fp8_quant.py argues the bound); `check` is the exact rule.
# Scales: amax is exact and amax / 448 against amax * (1 / 448) differ by one fp32 ulp (1.2e-7 relative).
TOLERANCES = {
    "fp8": fq.FP8_TOLERANCE,
    "fp32": Tolerance(atol=0.0, rtol=1e-6, rel_l2=1e-6),
}
SCALE_RTOL = TOLERANCES["fp32"].rtol

OUTLIER_SHARE = 0.005
OUTLIER_SCALE = (20.0, 100.0)


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = row_dims(NAME, dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE)
    return {"x": fq.with_padding_row(x, gen).to(torch_dtype(NAME, dtype))}


def _scales(x: torch.Tensor) -> torch.Tensor:
    return (x.float().abs().amax(dim=-1) / fq.FP8_MAX).clamp_min(fq.PER_TOKEN_MIN_SCALE)


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = _scales(x)
    return fq.quantize(x, scale[:, None]), scale


def baseline(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user runs instead in PyTorch: vLLM's QuantFP8 native path (amax, floor, x * (1 / scale))."""
    xf = x.float()
    scale = (xf.abs().amax(dim=-1, keepdim=True) / fq.FP8_MAX).clamp_min(fq.PER_TOKEN_MIN_SCALE)
    xq = (xf * scale.reciprocal()).clamp(-fq.FP8_MAX, fq.FP8_MAX).to(fq.FP8_DTYPE)
    return xq, scale.reshape(-1)


def check(inputs, outputs, reference_outputs) -> str | None:
    (xq, scale), (xq_ref, scale_ref) = outputs, reference_outputs
    unrounded = inputs["x"].double() / scale_ref.double()[:, None]
    return fq.quant_problem(xq, scale, xq_ref, scale_ref, unrounded, SCALE_RTOL, "row")


def output_spec(dims, dtype: str):
    T, H = row_dims(NAME, dims)
    torch_dtype(NAME, dtype)
    return ((T, H), "fp8"), ((T,), "fp32")


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 2 FLOPs per element (the max of |x| into the row's amax, the division by the scale; the clamp and
    the fp8 conversion are not arithmetic), fp32 on CUDA cores. Q: x read once, xq written once (1 byte an
    element), one fp32 scale per row."""
    T, H = row_dims(NAME, dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 2.0 * T * H}, float(T * H * b + T * H + 4 * T)


def interpreter_dims(dims) -> dict[str, int]:
    return row_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, default_cols=8192)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """Standalone per-token quantizations in one forward pass, per GPU, of an fp8 W8A8 deployment with dynamic
    per-token activation scales (`activation_quant: fp8_per_token` in configs/models.yaml: llama-3.1-70b-fp8).
    Modelled as vLLM runs it with its RMSNorm+quant fusion: the qkv and gate_up inputs are quantized inside
    the (fused-add) RMSNorm, so per layer two calls remain: the o_proj input [T, heads / tp * head_dim] and
    the down_proj input [T, intermediate_size / tp]. Models without it (bf16, DeepSeek-V3's block quant): none."""
    mc.check_call(NAME, tp, tokens)
    if model_cfg.get("activation_quant") != "fp8_per_token":
        return []
    layers = int(model_cfg["num_hidden_layers"])
    heads = mc.per_gpu(NAME, model_cfg["num_attention_heads"], tp, "num_attention_heads")
    inter = mc.per_gpu(NAME, model_cfg["intermediate_size"], tp, "intermediate_size")
    calls: Counter = Counter()
    calls[heads * int(model_cfg["head_dim"])] += layers
    calls[inter] += layers
    return [({"T": int(tokens), "H": h}, n) for h, n in calls.items()]
