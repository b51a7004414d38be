"""Weighted sum of each token's k expert outputs after a fused MoE GEMM: the reference, seeded inputs, the
work model and where models call it.

out[t, :] = sum_j weights[t, j] * x[t, j, :], accumulated in fp32, stored in x's dtype.
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import outlier_activations, row_holdout_dims, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "moe_sum_reduce"
SIGNATURE = "moe_sum_reduce(x[T,k,H], weights[T,k] fp32) -> [T,H]"
ARGS = ("x", "weights")
DESCRIPTION = (
    "The last step of a mixture-of-experts layer whose down-projection GEMM writes one row per (token, "
    "chosen expert): out[t, :] = sum over j < k of weights[t, j] * x[t, j, :]. x is [T, k, H] contiguous "
    "in bf16, fp16 or fp32 (the k expert outputs of each token next to each other); weights is [T, k] "
    "fp32, the router's probabilities (positive; each row sums to 1). The output is a new contiguous "
    "[T, H] tensor in x's dtype. Multiply and accumulate in fp32 and round once on the store. k is 2 "
    "(Mixtral), 4 (gpt-oss), 8 (Qwen3, DeepSeek-V3) or 10 (Qwen3-Next), and any other value in hold-out "
    "shapes; H is the model's hidden size (2048-7168, odd in hold-outs); T is 1-256 in decode and "
    "thousands in prefill."
)

# One rounding of the output dtype from an fp32 sum; rtol about two ulps (bf16 2^-8, fp16 2^-11). An
# unweighted sum is k-fold too large on average and fails every bound.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

OUTLIER_SHARE = 0.002            # expert outputs keep the residual stream's outlier channels
OUTLIER_SCALE = (20.0, 100.0)
ROUTER_TEMPERATURE = 1.0         # weights = softmax(N(0,1) / T): a leading expert at ~0.3-0.5 for k=8
HOLDOUT_MAX_T = 16384
HOLDOUT_ODD_K = (3, 5, 6)
_INTERP_MAX_T, _INTERP_MAX_H = 4, 256


def _dims(dims) -> tuple[int, int, int]:
    T, k, H = int(dims["T"]), int(dims["k"]), int(dims["H"])
    if min(T, k, H) < 1:
        raise ValueError(f"{NAME}: dims T={T}, k={k}, H={H} must all be >= 1")
    return T, k, H


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, k, H = _dims(dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T * k, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).reshape(T, k, H)
    logits = torch.randn(T, k, generator=gen, device=device, dtype=torch.float32) / ROUTER_TEMPERATURE
    return {"x": x.to(torch_dtype(NAME, dtype)), "weights": torch.softmax(logits, dim=-1).contiguous()}


def reference(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (x.double() * weights.double()[:, :, None]).sum(dim=1).to(x.dtype)


def baseline(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """What a user runs instead: a weighted sum in the activation dtype (as HF's MoE blocks do)."""
    return (x * weights.to(x.dtype)[:, :, None]).sum(dim=1)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, _, H = _dims(dims)
    torch_dtype(NAME, dtype)
    return (T, H), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 2 FLOPs (multiply, add) per element of x, on the fp32 peak. Q: x read once (T*k*H elements),
    the fp32 weights once (T*k*4 bytes), the output written once (T*H elements)."""
    T, k, H = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 2.0 * T * k * H}, float(T * k * H * b + T * k * 4 + T * H * b)


def interpreter_dims(dims) -> dict[str, int]:
    T, k, H = _dims(dims)
    return {"T": scale_down(T, _INTERP_MAX_T, 3), "k": k, "H": scale_down(H, _INTERP_MAX_H, 192 + H % 64)}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """The row-wise hold-outs over (T, H) (benchmarks.inputs.row_holdout_dims), each with a hot k, except the
    tiny one, which takes a k no model in the mix uses."""
    hot_k = sorted({int(d["k"]) for d in hot_dims}) or [8]
    shapes = row_holdout_dims(rng, hot_dims, row="T", col="H", default_cols=4096, max_rows=HOLDOUT_MAX_T)
    ks = [rng.choice(HOLDOUT_ODD_K)] + [rng.choice(hot_k) for _ in shapes[1:]]
    return [{"T": d["T"], "k": k, "H": d["H"]} for d, k in zip(shapes, ks)]


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """One call per MoE layer when the expert MLPs run as grouped GEMMs that write every (token, expert)
    row (vLLM's and SGLang's Triton fused-MoE path); the fused_moe operator stands for the whole layer, so
    its time and this one's overlap. Every GPU sums full H-wide rows (experts are split over TP by their
    intermediate size, the partial sums all-reduced afterwards): tp does not change the shape."""
    mc.check_call(NAME, tp, tokens)
    layers = mc.moe_layers(model_cfg)
    if not layers:
        return []
    dims = {"T": int(tokens), "k": int(model_cfg["num_experts_per_tok"]), "H": int(model_cfg["hidden_size"])}
    return [(dims, layers)]
