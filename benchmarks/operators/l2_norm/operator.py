"""L2 normalization of each row: the reference, seeded inputs, the work model and where models call it.

y = x / max(||x||_2, eps), computed in fp32, stored in x's dtype (torch.nn.functional.normalize).
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import outlier_activations, row_dims, row_holdout_dims, row_interpreter_dims, torch_dtype
from benchmarks.spec import Tolerance

NAME = "l2_norm"
SIGNATURE = "l2_norm(x[T,H], eps=1e-6) -> [T,H]"
ARGS = ("x", "eps")
DESCRIPTION = (
    "L2 normalization of each row of x (T rows by H channels): y[t, :] = x[t, :] / max(||x[t, :]||_2, eps), "
    "with ||.||_2 the Euclidean norm and eps a Python float (1e-6 in the benchmark); as applied to each "
    "query and key head (H = 128) of the Gated DeltaNet layers of Qwen3-Next, where the rows are "
    "tokens x heads. x is bf16, fp16 or fp32; the output is a new contiguous [T, H] tensor in x's dtype. "
    "Load, square and sum in fp32, divide in fp32 and round once on the store. x may have a row stride "
    "larger than H. Inputs carry a few outlier channels 20-100x larger than the rest. H is not always a "
    "power of two (odd hold-out sizes) and T ranges from a few rows (decode) to tens of thousands "
    "(8192 prefill tokens x 8 heads per GPU)."
)

# One rounding of the output dtype from an fp32 result; rtol allows about two ulps (bf16 2^-8, fp16
# 2^-11). Outputs are at most 1 in magnitude, so atol bounds the error of the many small entries.
TOLERANCES = {
    "bf16": Tolerance(atol=1e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=1e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-6, rtol=1e-5, rel_l2=1e-5),
}

DEFAULT_EPS = 1e-6
OUTLIER_SHARE = 0.005            # share of channels that are outliers (at least one)
OUTLIER_SCALE = (20.0, 100.0)    # outlier channels are N(0,1) times a scale drawn from this range
HOLDOUT_MAX_T = 1 << 19          # rows of the large hold-out shape (8192 tokens x 64 heads)


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = row_dims(NAME, dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(torch_dtype(NAME, dtype))
    return {"x": x, "eps": DEFAULT_EPS}


def reference(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    xf = x.float()
    return (xf / xf.norm(dim=-1, keepdim=True).clamp_min(eps)).to(x.dtype)


def baseline(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """What a user runs instead: torch.nn.functional.normalize in the activation dtype."""
    return torch.nn.functional.normalize(x, p=2.0, dim=-1, eps=eps)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, H = row_dims(NAME, dims)
    torch_dtype(NAME, dtype)
    return (T, H), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 3 FLOPs per element (square, add into the row sum, multiply by the reciprocal norm), counted
    against the fp32 peak (the math is fp32 on CUDA cores); the per-row sqrt, max and reciprocal are
    negligible next to 3*H. Q: x read once and y written once (T*H elements each)."""
    T, H = row_dims(NAME, dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 3.0 * T * H}, float(2 * T * H * b)


def interpreter_dims(dims) -> dict[str, int]:
    return row_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, default_cols=128, max_rows=HOLDOUT_MAX_T)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """L2 norms in one forward pass, per GPU: in each Gated DeltaNet layer of a hybrid model (Qwen3-Next),
    one over the query heads and one over the key heads, rows = tokens x linear_num_key_heads / tp (heads
    split over TP), H = linear_key_head_dim. Counted as separate calls, as in HF transformers' PyTorch
    path (vLLM fuses them into its chunked delta-rule kernel). Models without linear attention: none."""
    mc.check_call(NAME, tp, tokens)
    layers = mc.linear_attention_layers(model_cfg)
    if not layers:
        return []
    heads = mc.per_gpu(NAME, model_cfg["linear_num_key_heads"], tp, "linear_num_key_heads")
    return [({"T": int(tokens) * heads, "H": int(model_cfg["linear_key_head_dim"])}, 2 * layers)]
