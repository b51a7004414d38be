"""The correctness gate: tolerance math on crafted tensors, input digests, output checks, seeds, and the
hidden hold-out shapes end to end (never visible, never leaked through the candidate's stdout)."""
from __future__ import annotations

import json
import math
import random

import pytest
import torch

from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.spec import Shape, Tolerance
from sandbox import correctness as cx
from sandbox_requests import make_request
from sandbox.evaluation import EvalRequest, evaluate, evaluate_unlinted

TOL = Tolerance(atol=1e-3, rtol=1e-3, rel_l2=1e-3)


# ---- tolerance math ----------------------------------------------------------------------------
def test_identical_outputs_pass_with_zero_errors():
    ref = torch.randn(8, 16, dtype=torch.float64)
    stats = cx.compare(ref.clone(), ref, TOL)
    assert stats.passed and stats.max_abs_err == 0 and stats.rel_l2 == 0 and stats.n_bad == 0
    assert stats.describe(TOL) == ""


def test_a_single_bad_element_fails_and_is_located():
    ref = torch.ones(4, 5)
    out = ref.clone()
    out[2, 3] = 1.5
    stats = cx.compare(out, ref, Tolerance(atol=1e-3, rtol=1e-3, rel_l2=1.0))   # rel_l2 alone would pass
    assert not stats.passed
    assert stats.n_bad == 1 and stats.worst_index == (2, 3)
    assert stats.worst_got == pytest.approx(1.5) and stats.worst_expected == pytest.approx(1.0)
    assert stats.max_abs_err == pytest.approx(0.5) and stats.max_rel_err == pytest.approx(0.5)
    text = stats.describe(TOL)
    assert "1 of 20 elements exceed" in text and "[2, 3]" in text


def test_elementwise_bound_is_atol_plus_rtol_times_ref():
    ref = torch.tensor([0.0, 100.0])
    tol = Tolerance(atol=0.01, rtol=0.1, rel_l2=1.0)
    assert cx.compare(torch.tensor([0.0099, 110.0]), ref, tol).n_bad == 0      # 10 <= 0.01 + 0.1*100
    assert cx.compare(torch.tensor([0.0101, 100.0]), ref, tol).n_bad == 1
    assert cx.compare(torch.tensor([0.0, 110.02]), ref, tol).n_bad == 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_never_pass_however_loose_the_tolerance(bad):
    ref = torch.ones(10)
    out = ref.clone()
    out[7] = bad
    stats = cx.compare(out, ref, Tolerance(atol=1e9, rtol=1e9, rel_l2=1e9))
    assert not stats.passed and stats.n_nonfinite == 1
    assert math.isinf(stats.rel_l2) and math.isinf(stats.max_abs_err)
    assert "NaN/Inf" in stats.describe(TOL)


def test_rel_l2_fails_many_small_errors_that_pass_elementwise():
    ref = torch.ones(1000)
    out = ref + 0.009            # each within atol=0.01 ...
    tol = Tolerance(atol=0.01, rtol=0.0, rel_l2=1e-3)
    stats = cx.compare(out, ref, tol)
    assert stats.n_bad == 0 and stats.rel_l2 == pytest.approx(0.009, rel=1e-4)
    assert not stats.passed      # ... but ||out-ref|| / ||ref|| = 0.009 > 1e-3
    assert "rel_l2 0.009 > 0.001" in stats.describe(tol)


def test_zero_reference_and_low_precision_outputs():
    zero = torch.zeros(6)
    assert cx.compare(zero.clone(), zero, TOL).passed
    assert not cx.compare(zero + 1e-2, zero, TOL).passed     # rel_l2 of a nonzero error on a zero ref is inf
    ref = torch.randn(64, 64)
    bf = ref.to(torch.bfloat16)
    stats = cx.compare(bf, bf.float().to(torch.bfloat16), Tolerance(2e-2, 2e-2, 1e-2))
    assert stats.passed


def test_hidden_shape_descriptions_carry_no_counts_or_indices():
    ref = torch.ones(3, 4097)
    out = ref.clone()
    out[1, 4000] = 7.0
    out[2, 5] = math.nan
    stats = cx.compare(out, ref, TOL)
    hidden = stats.describe(TOL, detail=False)
    assert "NaN" in hidden and "exceed" in hidden
    for leak in ("4097", "12291", "4000", "of "):
        assert leak not in hidden


def test_a_non_finite_reference_is_a_harness_error():
    ref = torch.tensor([1.0, math.nan])
    with pytest.raises(cx.HarnessError, match="reference"):
        cx.compare(ref.clone(), ref, TOL)


def test_an_infinite_reference_value_must_be_matched_exactly():
    """Masked logits (-inf) are an answer: the same infinity passes, anything else there fails."""
    exact = Tolerance(atol=0.0, rtol=0.0, rel_l2=1e-9)
    ref = torch.tensor([1.5, -math.inf, 3.0])
    assert cx.compare(ref.clone(), ref, exact).passed
    kept = cx.compare(torch.tensor([1.5, 2.0, 3.0]), ref, exact)       # an entry that should be masked
    assert not kept.passed and kept.n_bad == 1 and kept.n_nonfinite == 0 and kept.worst_expected == -math.inf
    masked = cx.compare(torch.tensor([-math.inf, -math.inf, 3.0]), ref, exact)   # one that should be kept
    assert not masked.passed and masked.n_nonfinite == 1
    unwritten = cx.compare(torch.tensor([1.5, math.nan, 3.0]), ref, exact)
    assert not unwritten.passed and unwritten.n_nonfinite == 1
    assert not cx.compare(torch.tensor([1.5, math.inf, 3.0]), ref, exact).passed


# ---- input digests and output checks -----------------------------------------------------------
def test_input_digests_detect_any_edit_or_restride():
    spec = load_operator("rms_norm")
    a = spec.make_inputs({"T": 3, "H": 40}, "fp32", seed=5, device="cpu")
    b = spec.make_inputs({"T": 3, "H": 40}, "fp32", seed=5, device="cpu")
    da, db = cx.input_digests(a), cx.input_digests(b)
    assert set(da) == {"x", "weight"} and da == db
    b["x"][1, 7] += 1e-6
    assert cx.digest_mismatches(da, cx.input_digests(b)) == ["x"]
    c = spec.make_inputs({"T": 3, "H": 40}, "fp32", seed=5, device="cpu")
    c["weight"].as_strided_((20,), (2,))          # same storage bytes, different view
    assert cx.digest_mismatches(da, cx.input_digests(c)) == ["weight"]
    assert cx.digest_mismatches(da, "not a dict") == ["weight", "x"]
    assert cx.digest_mismatches(da, {"x": da["x"]}) == ["weight"]


def test_output_problems_name_the_kind():
    x = torch.randn(4, 8)
    good = torch.empty(4, 8)
    assert cx.output_problem(good, (4, 8), "fp32", "cpu", {"x": x}) is None
    assert cx.output_problem(torch.nn.Parameter(good), (4, 8), "fp32", "cpu", {"x": x})[0] == "type"
    assert cx.output_problem((good,), (4, 8), "fp32", "cpu", {"x": x})[0] == "type"
    assert cx.output_problem(good.to(torch.bfloat16), (4, 8), "fp32", "cpu", {"x": x})[0] == "dtype"
    assert cx.output_problem(good.t(), (4, 8), "fp32", "cpu", {"x": x})[0] == "shape"
    kind, why = cx.output_problem(x[:, :], (4, 8), "fp32", "cpu", {"x": x})
    assert kind == "alias" and "'x'" in why
    kind, why = cx.output_problem(good.t().contiguous().t(), (4, 8), "fp32", "cpu", {"x": x})
    assert kind == "layout" and "[1, 4]" in why and "[8, 1]" in why and "output layout rule" in why
    assert cx.output_problem(good.t().contiguous().t(), (4, 8), "fp32", "cpu", {"x": x}, layout="any") is None
    padded = torch.empty(4, 12)[:, :8]
    assert cx.output_problem(padded, (4, 8), "fp32", "cpu", {"x": x})[0] == "layout"
    assert cx.output_problem(torch.empty(1, 8).as_strided((1, 8), (999, 1)), (1, 8), "fp32", "cpu", {}) is None
    assert cx.output_problem(torch.empty(5, 8)[1:], (4, 8), "fp32", "cpu", {"x": x}) is None   # an offset view reads the same


def test_same_bytes_treats_nan_as_equal_and_detects_a_flip():
    a = torch.tensor([1.0, math.nan, 3.0])
    assert cx.same_bytes(a, a.clone())
    b = a.clone()
    b[2] = 3.0000002
    assert not cx.same_bytes(a, b)


# ---- seeds and hold-outs -----------------------------------------------------------------------
def test_seeds_are_distinct_per_part_and_reproducible():
    seeds = {cx.derive_seed(7, "check", s, t) for s in ("a", "b") for t in range(3)}
    assert len(seeds) == 6 and all(0 <= s < 2 ** 63 for s in seeds)
    assert cx.derive_seed(7, "check", "a", 0) == cx.derive_seed(7, "check", "a", 0)
    assert cx.derive_seed(7, "check", "a", 0) != cx.derive_seed(8, "check", "a", 0)
    assert cx.fresh_base_seed() != cx.fresh_base_seed()


def test_holdout_shapes_are_hidden_weightless_and_cycle_dtypes():
    spec = load_operator("rms_norm")
    hold = cx.holdout_shapes(spec, random.Random(3), ["bf16", "fp16"])
    assert len(hold) >= 2
    assert all(s.weight == 0 and not s.hot and s.id.startswith("holdout-") for s in hold)
    assert [s.dtype for s in hold[:2]] == ["bf16", "fp16"]
    assert [s.dim for s in hold] == spec.holdout_dims(random.Random(3))
    with pytest.raises(ValueError):
        cx.holdout_shapes(spec, random.Random(3), [])


# ---- end to end on rms_norm under the interpreter ----------------------------------------------
RMS_NORM = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    #INJECT
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(T,)](x, weight, y, H, x.stride(0), y.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return y
'''
VISIBLE = (Shape.make("d1", {"T": 1, "H": 128}, weight=2.0), Shape.make("d4", {"T": 4, "H": 256}, weight=1.0))


def _request(source: str, **kw) -> EvalRequest:
    kw.setdefault("timeout_s", 180.0)
    kw.setdefault("interpreter", True)       # the same checks on any machine
    return make_request("rms_norm", source, VISIBLE, **kw)


@pytest.mark.interpreter
def test_holdout_shapes_are_checked_but_never_visible_nor_printed():
    src = RMS_NORM.replace("    #INJECT", "    print('CALLED WITH', T, H)")
    res = evaluate(_request(src, trials=2))
    assert res.accepted, res.reasons
    hidden = [s for s in res.shapes if s.holdout]
    assert len(hidden) >= 2 and all(s.rel_l2 is not None and s.error is None for s in hidden)
    assert all(not s.holdout for s in res.visible_shapes())
    assert [s.id for s in res.visible_shapes()] == ["d1", "d4"]
    # The candidate printed every shape it saw; only visible ones may reach the report.
    printed = {tuple(map(int, ln.split()[2:4])) for ln in res.stdout_tail.splitlines() if ln.startswith("CALLED")}
    assert printed == {(1, 128), (4, 256)}
    visible_json = json.dumps(res.to_json()["shapes"][:len(res.visible_shapes())] + res.reasons)
    assert not any(row.get("holdout") for row in res.to_json()["shapes"][:len(res.visible_shapes())])
    for s in hidden:
        assert json.dumps(s.dims) not in visible_json
        if s.ran_dims:                                   # the dims that actually ran are as secret
            assert json.dumps(s.ran_dims) not in visible_json


@pytest.mark.interpreter
def test_stale_cache_is_caught_by_refilled_buffers():
    # A mutable default argument (the lint's job to stop, so it goes around the lint here): the
    # runtime must also catch an output cache keyed by shape.
    src = RMS_NORM.replace("def rms_norm(x, weight, eps=1e-6):", "def rms_norm(x, weight, eps=1e-6, _seen={}):")
    src = src.replace("    #INJECT", "    if (T, H) in _seen:\n        return _seen[(T, H)]")
    src = src.replace("    return y\n", "    _seen[(T, H)] = y\n    return y\n")
    res = evaluate_unlinted(_request(src, trials=2, holdout=False))
    assert not res.accepted and res.failed_stage == "correctness"
    assert "trial 2 of 2" in res.reasons[0] and "stale" in res.reasons[0]


@pytest.mark.interpreter
def test_special_casing_the_visible_shapes_fails_the_holdouts_without_naming_them():
    # Correct only for the two visible H values; anything else normalizes half the row.
    src = RMS_NORM.replace("BLOCK_H=triton.next_power_of_2(H))",
                           "BLOCK_H=triton.next_power_of_2(H) if H in (128, 256) else 64)")
    res = evaluate(_request(src, trials=1))
    assert not res.accepted and res.failed_stage == "correctness"
    assert "hold-out" in res.reasons[0]
    hidden = [s for s in res.shapes if s.holdout]
    failed = [s for s in hidden if s.error]
    assert failed
    for s in failed:
        assert str(s.dims["H"]) not in res.reasons[0] and str(s.dims["H"]) not in s.error


def test_poisoned_allocations_fill_torch_empty_and_restore_the_mode():
    before = (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    with cx.poisoned_allocations():
        assert torch.isnan(torch.empty(3, 5)).all()
        assert torch.isnan(torch.empty_like(torch.ones(7, dtype=torch.bfloat16))).all()
        assert (torch.empty(4, dtype=torch.int32) == 2 ** 31 - 1).all()
    assert (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory) == before


def _checksum_device() -> str:
    """Where the checksum kernel runs in these tests: the GPU when there is one, else the interpreter on CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def test_device_checksum_sees_any_single_edit_and_depends_on_the_key():
    """The GPU path of the input digest (weighted sums computed where the tensor lives), on CPU tensors
    under the interpreter without a GPU: it must notice a one-element edit, a swap, and a different key."""
    import torch
    x = torch.randn(4099, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16).to(_checksum_device())
    raw = x.view(torch.uint8)
    base = cx._device_checksum(raw, key=7)
    assert (cx._device_checksum(raw.clone(), key=7) == base).all()
    y = x.clone()
    y[1234] = y[1234] + 1
    assert not (cx._device_checksum(y.view(torch.uint8), key=7) == base).all()
    z = x.clone()
    z[[10, 11]] = z[[11, 10]]                     # a swap keeps the plain sum, not the weighted ones
    if not torch.equal(z, x):
        assert not (cx._device_checksum(z.view(torch.uint8), key=7) == base).all()
    assert not (cx._device_checksum(raw, key=8) == base).all()
    words = torch.arange(12, dtype=torch.int32, device=x.device).view(torch.uint8)   # 4-byte multiple: words
    assert cx._device_checksum(words, key=1).shape == (3,)


def _keyed_sums_by_the_formula(raw, key: int):
    """sandbox/digest_kernel.py's docstring formula, written as plain torch int64 operations (the oracle)."""
    import numpy as np
    import torch
    words = (raw.view(torch.int32) if raw.numel() % 4 == 0 else raw).to(torch.int64)
    mix = (int(key) * 0x2545F4914F6CDD1D + 0x632BE59BD9B4E019) & ((1 << 62) - 1)
    m = (torch.arange(words.numel(), dtype=torch.int64, device=raw.device) + mix) * 0x5851F42D4C957F2D
    m = m ^ (m >> 29)
    return np.array([int(words.sum()), int((words * m).sum()), int((words * ((m >> 17) | 1)).sum())],
                    dtype=np.int64)


@pytest.mark.parametrize("nbytes", [1, 3, 4, 4 * 4096, 4 * 4097 + 2, 4 * 9000])
def test_the_one_pass_checksum_kernel_equals_its_formula(nbytes):
    """The kernel (on the GPU, or under the interpreter) against the formula: bytes and 32-bit words, one block
    and several, keys that make the products wrap."""
    import torch
    raw = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=torch.Generator().manual_seed(nbytes))
    raw = raw.to(_checksum_device())
    for key in (0, 7, 2 ** 62 + 12345):
        assert (cx._device_checksum(raw, key) == _keyed_sums_by_the_formula(raw, key)).all(), key
