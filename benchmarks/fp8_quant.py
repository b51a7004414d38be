"""What the three fp8 activation quantizers share: the e4m3fn format, the reference rounding, the scale floors,
padding rows, and the correctness rule for a quantized output.

Operators: per_token_quant_fp8, per_token_group_quant_fp8, rms_norm_quant_fp8 (benchmarks/operators/).

Why a rule of its own (`quant_problem`). An fp8 result is not unique: two honest kernels whose fp32 scales or
quotients differ by an ulp (x / s against x * (1 / s), amax / 448 against amax * (1 / 448), another reduction
order for an RMS) round an element to different e4m3fn neighbours wherever x / s lies within a few fp32 ulps
of the midpoint between two of them. Measured with bf16 outlier activations: x * (1 / s) against x / s flips
5e-4 of the elements (15154 of 29.4M at T=4096 H=7168), each by exactly one code.

- The tolerance envelope (`FP8_TOLERANCE`, what the generic compare applies): one e4m3fn step. e4m3fn has
  3 mantissa bits: within the binade [2^e, 2^(e+1)) neighbours are 2^(e-3) apart, at most 1/8 of |ref|
  (reached at ref = 2^e going up); below the smallest normal 2^-6 the subnormals are 2^-9 apart. So
  |out - ref| <= 2^-9 + 2^-3 |ref| holds for every one-step flip; two steps (2^(e-2) at ref = 2^e, at least
  2/15 |ref| elsewhere) exceed it for |ref| >= 1/8, while below 1/8 (2.8e-4 of a row's 448) the atol the
  subnormals need lets two steps of the lowest binades through. rel_l2 cannot separate honest flips from a
  biased rounding on one-row shapes: a single honest flip of an outlier element measured rel_l2 0.052
  (T=1, H=1024) while round-toward-zero everywhere gives 0.039-0.057, so its limit is loose (0.08).
- The exact rule (`quant_problem`, each operator's `check`): every scale within its fp32 tolerance of the
  reference's, every xq element equal to the reference's code, or one code away where the reference's own
  unrounded value x / s lies within `slack` (relative) of the midpoint between the two codes. A different
  valid fp32 rounding passes; round-toward-zero, a wrong clamp, or another row's scale do not.
"""
from __future__ import annotations

import torch

from benchmarks.spec import Tolerance

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0                  # float8_e4m3fn's largest finite value (e4m3fnuz, AMD's, stops at 240)
# vLLM's dynamic per-token floor: scale >= 1 / (448 * 512), so x / scale never overflows and a zero row
# quantizes to zeros instead of 0 / 0.
PER_TOKEN_MIN_SCALE = 1.0 / (FP8_MAX * 512.0)
# The per-token-group kernels of vLLM and SGLang (DeepSeek-V3) clamp the group's amax instead: scale =
# max(amax, 1e-10) / 448.
GROUP_AMAX_EPS = 1e-10

FP8_TOLERANCE = Tolerance(atol=2.0 ** -9, rtol=2.0 ** -3, rel_l2=0.08)
# Relative distance from a rounding midpoint within which a one-step flip is an fp32 rounding difference:
# 2^-20 is 8 fp32 ulps (per-token and group scales differ by at most 1-2); rms_norm_quant_fp8 passes more
# roundings (rstd, weight) and gets 2^-18.
SLACK = 2.0 ** -20

# The DESCRIPTIONs' common closing sentences (a proposer reads each operator's on its own).
INTERPRETER_NOTE = (
    "Under Triton's CPU interpreter (tests without a GPU) the fp32 -> fp8 cast is wrong (no carry into the "
    "exponent, ties away from zero, no saturation); it is exact for values already on the e4m3fn grid, so "
    "round in fp32 first there (the seeds' ROUND_IN_FP32)."
)


def quantize(v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """fp32 values over their scale (broadcast), clamped to +-448, rounded to nearest even in e4m3fn."""
    return (v.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


def with_padding_row(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """x with one all-zero row (a CUDA-graph padding slot) at a seeded position when it has two rows or more:
    the row where the scale's floor decides the result (a kernel without it writes 0 / 0 = NaN)."""
    if x.shape[0] >= 2:
        row = int(torch.randint(0, x.shape[0], (1,), generator=gen, device=gen.device).item())
        x[row] = 0
    return x


def _codes(q: torch.Tensor) -> torch.Tensor:
    """e4m3fn codes as signed ordinals (adjacent values differ by 1; +0 and -0 are both 0)."""
    b = q.contiguous().view(torch.uint8).to(torch.int32)
    mag = b & 0x7F
    return torch.where(b >= 0x80, -mag, mag)


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    flat = int(torch.nonzero(mask.reshape(-1))[0, 0])
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(mask.shape)))


def scale_problem(scale: torch.Tensor, scale_ref: torch.Tensor, rtol: float, unit: str) -> str | None:
    """Why the scales differ from the reference's (None when each is within rtol), naming the first bad one
    and what it looks like: another row's scale, the e4m3fnuz maximum, or a missing floor."""
    s, r = scale.double(), scale_ref.double()
    bad = ~((s - r).abs() <= rtol * r.abs())
    if not bool(bad.any()):
        return None
    idx = _first(bad)
    got, want = float(s[idx]), float(r[idx])
    msg = (f"scale{list(idx)} = {got:.7g}, expected {want:.7g} (the amax of its own {unit} / 448, with the "
           f"floor of the contract; rtol {rtol:g})")
    if got == 0.0:
        msg += "; a zero scale: the scale must be clamped away from 0 (an all-zero padding row)"
    elif abs(got / want - FP8_MAX / 240.0) < 1e-3:
        msg += "; the ratio is 448/240: the maximum used is e4m3fnuz's 240, not float8_e4m3fn's 448"
    else:
        others = torch.nonzero(((r - got).abs() <= rtol * r.abs()).reshape(-1)).reshape(-1).tolist()
        if others:
            where = list(torch.unravel_index(torch.tensor(others[0]), tuple(r.shape)))
            msg += f"; it is the scale of another {unit}, {[int(i) for i in where]}"
    return msg


def fp8_problem(xq: torch.Tensor, xq_ref: torch.Tensor, unrounded: torch.Tensor, slack: float) -> str | None:
    """Why the quantized values differ from the reference's beyond a rounding tie-break (None when they do not).
    `unrounded` is the reference's value before rounding (x / scale, in float64)."""
    o, r = xq.double(), xq_ref.double()
    if not bool(torch.isfinite(o).all()):
        idx = _first(~torch.isfinite(o))
        return f"xq{list(idx)} is {float(o[idx])} (NaN/Inf never passes; a zero scale gives 0 / 0)"
    steps = (_codes(xq) - _codes(xq_ref)).abs()
    mid = (o + r) / 2
    tie = (steps == 1) & ((unrounded.double() - mid).abs() <= slack * mid.abs())
    bad = (steps != 0) & ~tie
    if not bool(bad.any()):
        return None
    idx = _first(bad)
    msg = (f"xq{list(idx)} = {float(o[idx]):g}, expected {float(r[idx]):g} (x / scale = {float(unrounded[idx]):.7g} "
           f"before rounding; {int(bad.sum())} of {bad.numel()} elements differ)")
    if int(steps[idx]) == 1:
        msg += ("; one e4m3fn step off although x / scale is not at a rounding midpoint: clamp to [-448, 448] "
                "and round to nearest, ties to even")
    else:
        msg += f"; {int(steps[idx])} e4m3fn steps apart"
    return msg


def quant_problem(xq, scale, xq_ref, scale_ref, unrounded, scale_rtol: float, unit: str,
                  slack: float = SLACK) -> str | None:
    """The operators' `check`: scales first (a wrong scale explains wrong values), then the values."""
    return scale_problem(scale, scale_ref, scale_rtol, unit) or fp8_problem(xq, xq_ref, unrounded, slack)
