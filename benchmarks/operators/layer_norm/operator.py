"""LayerNorm over the hidden dimension: the reference, seeded inputs, the work model and where models call it.

y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias (biased variance), computed in fp32, stored in x's
dtype. Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import outlier_activations, row_dims, row_holdout_dims, row_interpreter_dims, torch_dtype
from benchmarks.spec import Tolerance

NAME = "layer_norm"
SIGNATURE = "layer_norm(x[T,H], weight[H], bias[H], eps=1e-5) -> [T,H]"
ARGS = ("x", "weight", "bias", "eps")
DESCRIPTION = (
    "Layer normalization of each row of x (T tokens by H hidden channels), as in Cohere's Command models, "
    "vision towers and GPT-style models: y[t, :] = (x[t, :] - mu_t) / sqrt(sigma_t^2 + eps) * weight + bias "
    "with mu_t the row mean and sigma_t^2 = mean((x[t, :] - mu_t)^2) (the biased variance), eps a Python "
    "float (1e-5 in the benchmark). x, weight and bias share one dtype (bf16, fp16 or fp32); the output is "
    "a new contiguous [T, H] tensor in that dtype. Load, compute in fp32 (subtract the mean before "
    "squaring), round once on the store. x may have a row stride larger than H. Rows carry a per-token "
    "offset (their mean is not 0: RMSNorm is not LayerNorm) and a few outlier channels 20-100x larger than "
    "the rest. The bias is not zero. H is not always a power of two; T ranges from 1 to thousands."
)

# As rms_norm: one rounding of the output dtype from fp32 (two for kernels that round before the affine
# step), rtol about two ulps. Skipping the mean (a per-token offset of ~0.3 std here) or the bias changes
# outputs by >> these bounds.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

DEFAULT_EPS = 1e-5
OUTLIER_SHARE = 0.005
OUTLIER_SCALE = (20.0, 100.0)
ROW_OFFSET_STD = 0.3             # per-token offset (a DC component of the residual stream), N(0, 0.3^2)
BIAS_STD = 0.1
HOLDOUT_MAX_T = 16384


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = row_dims(NAME, dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE)
    x += ROW_OFFSET_STD * torch.randn(T, 1, generator=gen, device=device, dtype=torch.float32)
    weight = 1.0 + 0.1 * torch.randn(H, generator=gen, device=device, dtype=torch.float32)
    bias = BIAS_STD * torch.randn(H, generator=gen, device=device, dtype=torch.float32)
    return {"x": x.to(tdt), "weight": weight.to(tdt), "bias": bias.to(tdt), "eps": DEFAULT_EPS}


def reference(x, weight, bias, eps: float = DEFAULT_EPS) -> torch.Tensor:
    xf = x.double()
    mu = xf.mean(dim=-1, keepdim=True)
    var = (xf - mu).pow(2).mean(dim=-1, keepdim=True)
    return ((xf - mu) * torch.rsqrt(var + eps) * weight.double() + bias.double()).to(x.dtype)


def baseline(x, weight, bias, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """What a user runs instead: torch.nn.functional.layer_norm in the activation dtype."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def baseline_liger(x, weight, bias, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Liger-Kernel 0.8.5's LayerNorm (what its model patches install), for `aka bench --baseline liger` and the
    counters of a missed shape; the optional liger_kernel package is imported only here."""
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    return LigerLayerNormFunction.apply(x, weight, bias, eps)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, H = row_dims(NAME, dims)
    torch_dtype(NAME, dtype)
    return (T, H), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 7 FLOPs per element (add into the mean, subtract it, square, add into the variance, times rstd,
    times weight, plus bias) on the fp32 peak. Q: x read and y written once (T*H elements each), weight
    and bias read once (H each)."""
    T, H = row_dims(NAME, dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 7.0 * T * H}, float(2 * T * H * b + 2 * H * b)


def interpreter_dims(dims) -> dict[str, int]:
    return row_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, default_cols=4096, max_rows=HOLDOUT_MAX_T)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """LayerNorms in one forward pass of a model whose norm is LayerNorm (`norm: layer_norm` in
    configs/models.yaml): per layer one (a parallel attention + MLP block, Cohere) or two, plus the final
    norm, over hidden_size; replicated under TP, so tp does not change the shape. Cohere's LayerNorm has no
    bias: its calls are counted here all the same (a zero bias costs H reads). Other models: none."""
    mc.check_call(NAME, tp, tokens)
    if model_cfg.get("norm") != "layer_norm":
        return []
    layers = int(model_cfg["num_hidden_layers"])
    per_layer = 1 if model_cfg.get("parallel_block") else 2
    return [({"T": int(tokens), "H": int(model_cfg["hidden_size"])}, per_layer * layers + 1)]
