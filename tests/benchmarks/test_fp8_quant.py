"""The fp8 quantizers' shared rules (benchmarks/fp8_quant.py): the one-step envelope argued from the e4m3fn
format, the exact tie-aware check and the names it gives to the cheats, the padding row, and the seeds' fp32
rounding onto the e4m3fn grid (the path the CPU interpreter needs), bit for bit against torch's cast."""
import pytest
from op_helpers import load_seed, tolerance_failures
import torch

from benchmarks import fp8_quant as fq
from benchmarks.registry import load_operator

FINITE_CODES = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)


def _values(codes):
    return codes.view(torch.float8_e4m3fn).float()


def _positive_ladder():
    """Every non-negative finite e4m3fn value, ascending (codes 0x00..0x7E)."""
    return _values(torch.arange(0, 0x7F, dtype=torch.uint8))


def test_one_step_passes_the_envelope_and_two_steps_up_do_not():
    v = _positive_ladder()
    tol = fq.FP8_TOLERANCE
    for i in range(len(v) - 1):
        assert abs(float(v[i + 1] - v[i])) <= tol.atol + tol.rtol * float(v[i]), (i, float(v[i]))
        assert abs(float(v[i + 1] - v[i])) <= tol.atol + tol.rtol * float(v[i + 1])
    # Two steps up exceed it from 1/8 on; below, atol (kept for the subnormals' 2^-9 spacing) lets two steps of
    # the lowest binades through: values under 2.5e-4 of the row's largest (448). `check` is exact there.
    admitted = [float(v[i]) for i in range(len(v) - 2)
                if abs(float(v[i + 2] - v[i])) <= tol.atol + tol.rtol * float(v[i])]
    assert admitted and max(admitted) < 0.125
    assert float(v[-1]) == fq.FP8_MAX and torch.finfo(torch.float8_e4m3fn).max == fq.FP8_MAX


def test_the_envelope_fails_a_quantizer_with_the_e4m3fnuz_maximum():
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(0))
    ref = fq.quantize(x, x.abs().amax(-1, keepdim=True) / 448)
    fnuz = fq.quantize(x, x.abs().amax(-1, keepdim=True) / 240)
    assert tolerance_failures(fnuz, ref, fq.FP8_TOLERANCE)


def _one_row(values):
    x = torch.tensor([values], dtype=torch.float32)
    scale = torch.ones(1)
    return x, scale


def test_check_admits_a_flip_at_a_midpoint_only():
    # 10.5 is the midpoint of 10 and 11 (ties to even: 10); 10.3 is not near one.
    x, s = _one_row([10.5, 10.3, 448.0])
    ref = fq.quantize(x, s[:, None])
    assert ref[0, 0].float() == 10 and ref[0, 1].float() == 10
    up = ref.clone().view(torch.uint8)
    up[0, 0] += 1
    flipped = up.view(torch.float8_e4m3fn)
    assert fq.quant_problem(flipped, s, ref, s, x.double(), 1e-6, "row") is None
    up = ref.clone().view(torch.uint8)
    up[0, 1] += 1
    why = fq.quant_problem(up.view(torch.float8_e4m3fn), s, ref, s, x.double(), 1e-6, "row")
    assert why and "not at a rounding midpoint" in why and "xq[0, 1]" in why
    up[0, 1] += 1
    why = fq.quant_problem(up.view(torch.float8_e4m3fn), s, ref, s, x.double(), 1e-6, "row")
    assert "2 e4m3fn steps apart" in why


def test_check_names_the_scale_cheats():
    scale_ref = torch.tensor([0.5, 0.25, fq.PER_TOKEN_MIN_SCALE])
    xq = torch.zeros(3, 4, dtype=torch.float8_e4m3fn)
    u = torch.zeros(3, 4, dtype=torch.float64)
    other_row = torch.tensor([0.25, 0.25, fq.PER_TOKEN_MIN_SCALE])
    assert "another row, [1]" in fq.quant_problem(xq, other_row, xq, scale_ref, u, 1e-6, "row")
    fnuz = scale_ref * (448 / 240)
    assert "240" in fq.quant_problem(xq, fnuz, xq, scale_ref, u, 1e-6, "row")
    no_floor = torch.tensor([0.5, 0.25, 0.0])
    assert "clamped away from 0" in fq.quant_problem(xq, no_floor, xq, scale_ref, u, 1e-6, "row")
    nan = torch.full((3, 4), float("nan")).to(torch.float8_e4m3fn)
    assert "NaN" in fq.quant_problem(nan, scale_ref, xq, scale_ref, u, 1e-6, "row")


def test_padding_row():
    gen = torch.Generator().manual_seed(3)
    x = fq.with_padding_row(torch.ones(5, 8), gen)
    assert int((x.abs().sum(-1) == 0).sum()) == 1
    assert bool((fq.with_padding_row(torch.ones(1, 8), gen) == 1).all())


@pytest.mark.interpreter
def test_seed_rounding_matches_torch_bit_for_bit():
    """Every e4m3fn value, every midpoint between neighbours (the ties), one fp32 ulp either side of each,
    and values spread log-uniformly over +-[2^-12, 448], through the per-token seed's fp32 rounding path: rows
    whose largest value is 448 have scale 1, so xq is the rounding of x itself, and it is torch's code."""
    seed = load_seed(load_operator("per_token_quant_fp8").seed_path, "aka_seed_fp8_rounding_test")
    ladder = _positive_ladder()
    mids = (ladder[1:] + ladder[:-1]) / 2
    near = torch.cat([torch.nextafter(mids, mids + 1), torch.nextafter(mids, mids - 1)])
    spread = torch.exp2(torch.empty(2000).uniform_(-12, 8.8, generator=torch.Generator().manual_seed(1)))
    pos = torch.cat([ladder, mids, near, spread.clamp(max=448)])
    v = torch.cat([pos, -pos])
    width = 1023
    v = torch.cat([v, torch.zeros(-v.numel() % width)]).reshape(-1, width)
    x = torch.cat([torch.full((v.shape[0], 1), 448.0), v], dim=1)
    xq, scale = seed.per_token_quant_fp8(x)
    assert bool((scale == 1).all())
    want = x.to(torch.float8_e4m3fn)
    diff = xq.float() != want.float()
    assert not bool(diff.any()), (x[diff][:5], xq.float()[diff][:5], want.float()[diff][:5])
