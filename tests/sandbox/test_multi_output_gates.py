"""The multi-output contract's gate paths on the CPU (tests/sandbox/multiout_operators.py): several outputs,
integer outputs compared exactly, arguments written in place (MUTATES) compared whole while every other
argument must stay unchanged, and an operator's own `check` instead of the elementwise comparison."""
from __future__ import annotations

import pytest

from multiout_operators import write_operators
from sandbox_requests import make_request

from benchmarks.spec import Shape, Tolerance
from sandbox import correctness as cx
from sandbox.evaluation import evaluate_unlinted
from sandbox.trial_evidence import INPUT_WRITE_RULE

SUM_DIFF_SIGN = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _sum_diff_sign_kernel(x_ptr, y_ptr, s_ptr, d_ptr, p_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    s = x + y
    d = x - y
    p = (s > 0).to(tl.int32)
    tl.store(s_ptr + offs, s, mask=mask)
    tl.store(d_ptr + offs, d, mask=mask)
    tl.store(p_ptr + offs, p, mask=mask)


def sum_diff_sign(x, y):
    s, d = torch.empty_like(x), torch.empty_like(x)
    p = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    _sum_diff_sign_kernel[(1,)](x, y, s, d, p, x.numel(), BLOCK=64)
    return s, d, p
'''

SCATTER_ROWS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _scatter_rows_kernel(x_ptr, cache_ptr, slots_ptr, D, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slots_ptr + t)
    offs = tl.arange(0, BLOCK)
    row = tl.load(x_ptr + t * D + offs, mask=offs < D)
    tl.store(cache_ptr + slot * D + offs, row, mask=(offs < D) & (slot >= 0))
    #EXTRA


@triton.jit
def _clear_kernel(cache_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(cache_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)


def scatter_rows(x, cache, slots):
    #CLEAR
    _scatter_rows_kernel[(x.shape[0],)](x, cache, slots, x.shape[1], BLOCK=16)
'''

STABLE_RANK = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _stable_rank_kernel(keys_ptr, order_ptr, n, BLOCK: tl.constexpr, TIES: tl.constexpr):
    i = tl.arange(0, BLOCK)
    j = tl.arange(0, BLOCK)
    ki = tl.load(keys_ptr + i, mask=i < n, other=1 << 30)
    kj = tl.load(keys_ptr + j, mask=j < n, other=1 << 30)
    before = kj[None, :] < ki[:, None]
    if TIES == 1:       # equal keys ranked by position: the stable order
        before = before | ((kj[None, :] == ki[:, None]) & (j[None, :] < i[:, None]))
    if TIES == 2:       # equal keys in reverse: another valid order
        before = before | ((kj[None, :] == ki[:, None]) & (j[None, :] > i[:, None]))
    rank = tl.sum(before.to(tl.int32), axis=1)
    tl.store(order_ptr + rank, i.to(tl.int64), mask=i < n)


def stable_rank(keys):
    order = torch.empty(keys.shape, dtype=torch.int64, device=keys.device)
    _stable_rank_kernel[(1,)](keys, order, keys.numel(), BLOCK=32, TIES=TIES_MODE)
    return (order,)
'''


@pytest.fixture(scope="module")
def op_dir(tmp_path_factory) -> str:
    return write_operators(tmp_path_factory.mktemp("multiout_ops"))


def run(op: str, source: str, op_dir: str, dims: dict, **kw):
    kw.setdefault("holdout", False)
    req = make_request(op, source, (Shape.make("s0", dims, dtype="bf16"),), trials=2, timeout_s=120.0,
                       interpreter=True, **kw)
    return evaluate_unlinted(req, operator_dir=op_dir)


# ---- the tolerance math for integer outputs ------------------------------------------------------
def test_integer_and_bool_outputs_are_compared_exactly_whatever_the_tolerance():
    import torch
    loose = Tolerance(10.0, 10.0, 10.0)
    ref = torch.tensor([3, 7, 9], dtype=torch.int32)
    assert cx.compare(ref.clone(), ref, loose).passed
    off = cx.compare(torch.tensor([3, 8, 9], dtype=torch.int32), ref, loose)
    assert not off.passed and off.n_bad == 1 and off.worst_index == (1,)
    assert "1 of 3 elements differ" in off.describe(loose) and "got 8, expected 7" in off.describe(loose)
    flags = torch.tensor([True, False])
    assert not cx.compare(torch.tensor([True, True]), flags, loose).passed


def test_fp8_outputs_compare_with_their_tolerance():
    import torch
    ref = torch.tensor([1.0, -2.0, 448.0]).to(torch.float8_e4m3fn)
    tol = Tolerance(0.0, 0.07, 0.05)
    assert cx.compare(ref.clone(), ref, tol).passed
    assert not cx.compare(torch.tensor([1.0, 2.0, 448.0]).to(torch.float8_e4m3fn), ref, tol).passed


# ---- several outputs ----------------------------------------------------------------------------
@pytest.mark.interpreter
def test_a_tuple_of_outputs_passes_and_a_wrong_second_output_is_named(op_dir):
    dims = {"N": 40}
    honest = run("sum_diff_sign", SUM_DIFF_SIGN, op_dir, dims)
    assert honest.accepted, honest.reasons
    res = run("sum_diff_sign", SUM_DIFF_SIGN.replace("d = x - y", "d = y - x"), op_dir, dims)
    assert res.failed_stage == "correctness" and "output diff:" in res.reasons[0], res.reasons
    assert "output sum:" not in res.reasons[0]


@pytest.mark.interpreter
def test_a_wrong_integer_output_is_rejected_exactly(op_dir):
    # s > -0.3 differs from s > 0 in a few of 40 elements: well inside any float tolerance, still wrong
    res = run("sum_diff_sign", SUM_DIFF_SIGN.replace("(s > 0)", "(s > -0.3)"), op_dir, {"N": 40})
    assert res.failed_stage == "correctness", res.reasons
    assert "output positive:" in res.reasons[0] and "compared exactly" in res.reasons[0], res.reasons


@pytest.mark.interpreter
def test_the_return_value_must_be_a_tuple_of_distinct_outputs(op_dir):
    as_list = run("sum_diff_sign", SUM_DIFF_SIGN.replace("return s, d, p", "return [s, d, p]"), op_dir, {"N": 40})
    assert as_list.failed_stage == "correctness" and "must return a tuple of 3 tensors" in as_list.reasons[0]
    shared = SUM_DIFF_SIGN.replace("s, d = torch.empty_like(x), torch.empty_like(x)", "s = torch.empty_like(x)\n    d = s")
    res = run("sum_diff_sign", shared, op_dir, {"N": 40})
    assert res.failed_stage == "correctness" and "share memory" in res.reasons[0], res.reasons


# ---- arguments written in place -----------------------------------------------------------------
SCATTER_DIMS = {"T": 6, "D": 16, "S": 32}


@pytest.mark.interpreter
def test_an_in_place_operator_passes_with_its_mutated_argument_writable_on_the_read_only_call(op_dir):
    res = run("scatter_rows", SCATTER_ROWS, op_dir, SCATTER_DIMS)
    assert res.accepted, res.reasons


@pytest.mark.interpreter
def test_a_mutated_argument_with_an_untouched_slot_changed_is_rejected(op_dir):
    clear = SCATTER_ROWS.replace("    #CLEAR", "    _clear_kernel[(4,)](cache, cache.numel(), BLOCK=128)")
    res = run("scatter_rows", clear, op_dir, SCATTER_DIMS)
    assert res.failed_stage == "correctness", res.reasons
    assert "cache (written in place, compared whole" in res.reasons[0], res.reasons


@pytest.mark.interpreter
def test_writing_an_argument_outside_mutates_is_rejected_by_digest_and_by_the_read_only_call(op_dir):
    kept = SCATTER_ROWS.replace("    #EXTRA", "    tl.store(x_ptr + t * D + offs, row * 0.0, mask=offs < D)")
    res = run("scatter_rows", kept, op_dir, SCATTER_DIMS)
    assert res.failed_stage == "correctness", res.reasons
    assert "input(s) x changed" in res.reasons[0] and "only cache may be written" in res.reasons[0], res.reasons
    restored = SCATTER_ROWS.replace(
        "    #EXTRA", "    tl.store(x_ptr + t * D + offs, row * 0.0, mask=offs < D)\n"
                     "    tl.store(x_ptr + t * D + offs, row, mask=offs < D)")
    res = run("scatter_rows", restored, op_dir, SCATTER_DIMS)
    assert res.failed_stage == "correctness" and res.reasons[0].startswith(INPUT_WRITE_RULE), res.reasons


@pytest.mark.interpreter
def test_an_in_place_operator_must_return_none(op_dir):
    src = SCATTER_ROWS.replace("BLOCK=16)\n", "BLOCK=16)\n    return cache\n")
    res = run("scatter_rows", src, op_dir, SCATTER_DIMS)
    assert res.failed_stage == "correctness" and "must return None" in res.reasons[0], res.reasons


# ---- the operator's own check ------------------------------------------------------------------
@pytest.mark.interpreter
def test_check_accepts_another_valid_order_and_names_an_invalid_one(op_dir):
    dims = {"N": 24}
    stable = run("stable_rank", STABLE_RANK.replace("TIES_MODE", "1"), op_dir, dims)
    assert stable.accepted, stable.reasons
    reverse = run("stable_rank", STABLE_RANK.replace("TIES_MODE", "2"), op_dir, dims)
    assert reverse.accepted, reverse.reasons          # an elementwise comparison would reject it
    collide = run("stable_rank", STABLE_RANK.replace("TIES_MODE", "0"), op_dir, dims)
    assert collide.failed_stage == "correctness", collide.reasons
    assert "invariant check of stable_rank:" in collide.reasons[0], collide.reasons
