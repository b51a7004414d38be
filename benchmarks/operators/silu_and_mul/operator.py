"""SiLU-and-multiply, the gated activation of SwiGLU MLPs: the reference, seeded inputs, the work model
and where models call it.

out = silu(x[:, :I]) * x[:, I:] with silu(a) = a / (1 + exp(-a)), computed in fp32, stored in x's dtype.
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

from collections import Counter

import torch

from benchmarks.inputs import is_pow2, not_pow2, outlier_activations, torch_dtype
from benchmarks.spec import Tolerance

NAME = "silu_and_mul"
SIGNATURE = "silu_and_mul(x[T,2I]) -> [T,I]"
ARGS = ("x",)
DESCRIPTION = (
    "Gated activation of a SwiGLU MLP, applied to the fused gate/up projection output x (T tokens by 2*I "
    "channels): out[t, i] = silu(x[t, i]) * x[t, I + i] for i < I, where silu(a) = a * sigmoid(a) = "
    "a / (1 + exp(-a)). The first half of each row is the gate, the second half the up projection. The output "
    "is a new contiguous [T, I] tensor in x's dtype (bf16, fp16 or fp32). Load the inputs, compute in fp32 "
    "and round once on the store. x may have a row stride larger than 2*I. Inputs carry a few outlier "
    "channels 20-100x larger than the rest (gate values down to about -400, where exp(-a) overflows fp32 "
    "and the exact result is -0). I is not always a power of two (e.g. 2304, 3584, odd hold-out sizes) and "
    "T ranges from 1 (decode) to thousands (prefill)."
)

# One rounding of the output dtype from an fp32 result (vLLM rounds silu(gate) before the multiply:
# two roundings); rtol allows about two ulps (bf16 2^-8, fp16 2^-11 relative). fp32 allows the
# relative error of a fast exp2 on |a| up to ~20 (|a| * log2(e) * 2^-24 ~ 2e-6) with margin.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

OUTLIER_SHARE = 0.005            # share of channels that are outliers (at least one)
OUTLIER_SCALE = (20.0, 100.0)    # outlier channels are N(0,1) times a scale drawn from this range
MOE_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")

_INTERP_MAX_T, _INTERP_MAX_I = 4, 256


def _dims(dims) -> tuple[int, int]:
    T, I = int(dims["T"]), int(dims["I"])
    if T < 1 or I < 1:
        raise ValueError(f"{NAME}: dims T={T}, I={I} must both be >= 1")
    return T, I


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, I = _dims(dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return {"x": outlier_activations(T, 2 * I, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(torch_dtype(NAME, dtype))}


def reference(x: torch.Tensor) -> torch.Tensor:
    I = x.shape[-1] // 2
    xf = x.float()
    return (torch.nn.functional.silu(xf[:, :I]) * xf[:, I:]).to(x.dtype)


def baseline(x: torch.Tensor) -> torch.Tensor:
    """What a user runs instead: vLLM's native PyTorch SiluAndMul, in the activation dtype."""
    I = x.shape[-1] // 2
    return torch.nn.functional.silu(x[:, :I]) * x[:, I:]


def baseline_liger_inputs(x: torch.Tensor) -> dict:
    """Liger's SwiGLU MLP holds gate and up as two [T, I] tensors (separate projections), and its kernel
    takes one row stride for both and the output: split x once per input set, outside the timed call."""
    I = x.shape[-1] // 2
    return {"gate": x[:, :I].contiguous(), "up": x[:, I:].contiguous()}


def baseline_liger(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Liger-Kernel's fused SiLU-and-multiply forward (`--baseline liger`): one Triton kernel, one row per
    program; the same bytes as silu_and_mul(x) (read T*2I, write T*I)."""
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction   # optional dependency, imported on use
    return LigerSiLUMulFunction.apply(gate, up)


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, I = _dims(dims)
    torch_dtype(NAME, dtype)
    return (T, I), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 5 FLOPs per output element: silu(a) = a / (1 + exp(-a)) is a negation, an exp, an add and a
    divide (4), then one multiply by the up value. The arithmetic is fp32 on CUDA cores whatever the
    storage dtype, so W is counted against the fp32 peak.
    Q: x read once (T*2I elements) and the output written once (T*I elements)."""
    T, I = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 5.0 * T * I}, float(2 * T * I * b + T * I * b)


def _scale_down(n: int, limit: int, not_pow2_size: int) -> int:
    """n if it already fits; otherwise `limit` for powers of two and a non-power-of-two size for the rest."""
    if n <= limit:
        return n
    return limit if is_pow2(n) else not_pow2_size


def interpreter_dims(dims) -> dict[str, int]:
    T, I = _dims(dims)
    # 192 + I % 64 stays in 192..255, which holds no power of two, and keeps I's oddness.
    return {"T": _scale_down(T, _INTERP_MAX_T, 3), "I": _scale_down(I, _INTERP_MAX_I, 192 + I % 64)}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes: a tiny odd T with an odd I near a hot I (so the up half starts misaligned),
    a non-power-of-two T at a hot I, a T larger than every hot T, and an odd I larger than every hot I."""
    hot_T = sorted({int(d["T"]) for d in hot_dims}) or [1, 64, 4096]
    hot_I = sorted({int(d["I"]) for d in hot_dims}) or [14336]
    max_T, max_I = hot_T[-1], hot_I[-1]
    odd_near_hot = (rng.choice(hot_I) - 2 * rng.randrange(1, 32)) | 1
    return [
        {"T": rng.choice([3, 5, 7, 11, 13]), "I": max(odd_near_hot, 1)},
        {"T": not_pow2(rng.randrange(17, 2048)), "I": rng.choice(hot_I)},
        {"T": not_pow2(max_T + rng.randrange(1, max_T // 2 + 2)), "I": rng.choice(hot_I)},
        {"T": rng.choice([1, 2, 5]), "I": max_I + 2 * rng.randrange(1, 64) + 1},
    ]


def _per_gpu(size: int, tp: int, what: str) -> int:
    if size % tp:
        raise ValueError(f"{NAME}.occurrences: {what}={size} is not divisible by tp={tp}; "
                         f"use a tensor-parallel degree that divides it")
    return size // tp


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """silu_and_mul calls in one forward pass, per GPU. Only dense (SwiGLU) MLPs call it: MoE experts
    fuse their activation inside fused_moe. The MLP's intermediate dimension is split over `tp` GPUs.
    Dense models: every layer, I = intermediate_size / tp. DeepSeek-V3: the first_k_dense_replace dense
    layers with I = intermediate_size / tp, and the shared expert of every MoE layer, a dense MLP with
    I = moe_intermediate_size * n_shared_experts / tp. Other MoE models (no shared expert): none."""
    if tp < 1 or tokens < 1:
        raise ValueError(f"{NAME}.occurrences: tp={tp} and tokens={tokens} must both be >= 1")
    layers = int(model_cfg["num_hidden_layers"])
    counts: Counter = Counter()
    if "first_k_dense_replace" in model_cfg:
        dense = int(model_cfg["first_k_dense_replace"])
        counts[_per_gpu(int(model_cfg["intermediate_size"]), tp, "intermediate_size")] += dense
        shared = int(model_cfg.get("n_shared_experts") or 0)
        if shared:
            size = int(model_cfg["moe_intermediate_size"]) * shared
            counts[_per_gpu(size, tp, "moe_intermediate_size * n_shared_experts")] += layers - dense
    elif not any(k in model_cfg for k in MOE_EXPERT_KEYS):
        counts[_per_gpu(int(model_cfg["intermediate_size"]), tp, "intermediate_size")] += layers
    return [({"T": int(tokens), "I": I}, n) for I, n in counts.items() if n > 0]
