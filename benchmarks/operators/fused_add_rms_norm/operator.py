"""Fused residual add + RMSNorm: the reference, seeded inputs, the work model and where models call it.

residual_out = x + residual, rounded to the activation dtype; out = rms_norm(residual_out) * weight.
Two outputs (OUTPUTS), returned as a tuple in that order. Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import outlier_activations, row_dims, row_holdout_dims, row_interpreter_dims, torch_dtype
from benchmarks.spec import Tolerance

NAME = "fused_add_rms_norm"
SIGNATURE = ("fused_add_rms_norm(x[T,H], residual[T,H], weight[H], eps=1e-6) -> (out[T,H], residual_out[T,H])")
ARGS = ("x", "residual", "weight", "eps")
OUTPUTS = ("out", "residual_out")
DESCRIPTION = (
    "The residual add and RMSNorm between the blocks of Llama/Qwen/DeepSeek decoders, fused as vLLM and "
    "SGLang run them (T tokens by H hidden channels): residual_out[t, :] = x[t, :] + residual[t, :], added in "
    "fp32 and rounded once to the activation dtype (the new residual stream the next block adds onto); then "
    "out[t, :] = r[t, :] / sqrt(mean(r[t, :]^2) + eps) * weight with r = residual_out AS ROUNDED, all in fp32, "
    "rounded once on the store. eps is a Python float (1e-6 in the benchmark). x, residual and weight share "
    "one dtype (bf16, fp16 or fp32). Return the tuple (out, residual_out): two new contiguous [T, H] tensors "
    "in that dtype, each its own allocation; x and residual must not be written (vLLM's op overwrites them in "
    "place; here they are inputs another stream may still read). x is a block's output with a few outlier "
    "channels 20-100x larger; residual is the residual stream, 4x larger, with its own massive channels up to "
    "several hundred. H is not always a power of two (odd hold-out sizes); T ranges from 1 (decode) to "
    "thousands (prefill)."
)

# Both outputs are rounded once from fp32. residual_out: one rounding of an exact fp32 sum, so honest kernels
# agree bit for bit. out: two honest kernels differ by reduction order (~1e-7) and by one extra rounding when
# the normalized value is rounded before the weight multiply (vLLM does); rtol allows about two ulps (bf16
# 2^-8, fp16 2^-11). Normalizing x instead of the sum, or skipping the weight (1 +- 0.1), is off by far more.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

DEFAULT_EPS = 1e-6
OUTLIER_SHARE = 0.005
OUTLIER_SCALE = (20.0, 100.0)
RESIDUAL_STD = 4.0           # the residual stream grows over the layers: larger than one block's output
RESIDUAL_OUTLIER_SCALE = (50.0, 150.0)   # massive activations of a few residual channels (x RESIDUAL_STD)
HOLDOUT_MAX_T = 1 << 16


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = row_dims(NAME, dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(tdt)
    residual = (RESIDUAL_STD * outlier_activations(T, H, gen, device, OUTLIER_SHARE, RESIDUAL_OUTLIER_SCALE)).to(tdt)
    weight = (1.0 + 0.1 * torch.randn(H, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    return {"x": x, "residual": residual, "weight": weight, "eps": DEFAULT_EPS}


def reference(x, residual, weight, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    residual_out = (x.float() + residual.float()).to(x.dtype)
    r = residual_out.float()
    rstd = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (r * rstd * weight.float()).to(x.dtype), residual_out


def baseline(x, residual, weight, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user runs instead: HF transformers' decoder layer, `hidden = residual + x` in the activation
    dtype, then LlamaRMSNorm (fp32 math, weight applied after the cast back)."""
    residual_out = residual + x
    h = residual_out.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype), residual_out


def baseline_liger(x, residual, weight, eps: float = DEFAULT_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """Liger-Kernel's fused add + RMSNorm forward (`--baseline liger`), Llama casting mode, not in place:
    one Triton kernel returning (normalized, residual sum), plus the fp32 rstd it keeps for the backward."""
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction   # optional, imported on use
    return tuple(LigerFusedAddRMSNormFunction.apply(x, residual, weight, eps, 0.0, "llama", False))


def output_spec(dims, dtype: str):
    T, H = row_dims(NAME, dims)
    torch_dtype(NAME, dtype)
    return ((T, H), dtype), ((T, H), dtype)


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 5 FLOPs per element (the add, then RMSNorm's square, add into the row sum, times rstd, times
    weight), fp32 peak (CUDA-core math). Q: x and residual read once, out and residual_out written once
    (T*H elements each), weight read once (H)."""
    T, H = row_dims(NAME, dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 5.0 * T * H}, float(4 * T * H * b + H * b)


def interpreter_dims(dims) -> dict[str, int]:
    return row_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, default_cols=4096, max_rows=HOLDOUT_MAX_T)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """Fused add + RMSNorm calls in one forward pass, per GPU. vLLM and SGLang fuse the residual add into
    every hidden-size norm that has a residual: each layer's post-attention norm, the input norm of every
    layer but the first (layer 0 has no residual yet), and the final norm: 2 x num_hidden_layers calls over
    hidden_size. Norm weights are replicated under tensor parallelism, so `tp` does not change the shape.
    Llama 3.1, Qwen3 (dense and MoE), DeepSeek-V3, Mixtral, gpt-oss and Qwen3-Next (its zero-centred norm
    is the same kernel with the weight offset by 1). Models whose norm is LayerNorm (Cohere's): none.
    rms_norm's occurrences count only the one hidden norm without a residual (layer 0's input norm)."""
    mc.check_call(NAME, tp, tokens)
    if model_cfg.get("norm") == "layer_norm":
        return []
    return [({"T": int(tokens), "H": int(model_cfg["hidden_size"])}, 2 * int(model_cfg["num_hidden_layers"]))]
