"""The reference's element scale (OperatorSpec.reference_with_scale): the element bound becomes
atol + rtol * max(|ref|, scale), rel_l2 stays global, NaN/Inf never pass, a broken scale is the operator's
bug, and the scale reaches the gate only from the parent's own reference (results.expected), through the
real sandbox too. fused_moe's own scale: tests/benchmarks/test_op_fused_moe.py."""
from __future__ import annotations

import math

import pytest
import torch

from benchmarks.spec import Shape, Tolerance
from sandbox import correctness as cx
from sandbox import results
from sandbox_requests import make_request
from sandbox.evaluation import evaluate_unlinted

TOL = Tolerance(atol=0.25, rtol=0.02, rel_l2=1e-2)


# ---- the tolerance math --------------------------------------------------------------------------
def test_the_scale_widens_the_element_bound_to_its_summands():
    ref = torch.tensor([0.74, 0.74, 50.0])
    out = torch.tensor([1.24, 0.74, 50.0])           # off by 0.5 where the summands were ~100
    scale = torch.tensor([100.0, 100.0, 1.0])        # below |ref| (the third): |ref| still counts
    plain = cx.compare(out, ref, Tolerance(0.25, 0.02, 1.0))
    scaled = cx.compare(out, ref, Tolerance(0.25, 0.02, 1.0), scale=scale)
    assert not plain.passed and plain.n_bad == 1 and not plain.scaled
    assert scaled.passed and scaled.scaled                # 0.5 <= 0.25 + 0.02 * 100
    assert scaled.rel_l2 == plain.rel_l2 and scaled.max_rel_err == plain.max_rel_err   # only the bound moves
    # The bound is atol + rtol * max(|ref|, scale), no more: just past it fails.
    assert cx.compare(torch.tensor([0.74 + 2.26, 0.74, 50.0]), ref, Tolerance(0.25, 0.02, 1.0), scale=scale).n_bad == 1
    assert cx.compare(torch.tensor([0.74, 0.74, 51.3]), ref, Tolerance(0.25, 0.02, 1.0), scale=scale).n_bad == 1


def test_with_a_scale_rel_l2_still_fails_and_the_message_names_the_bound():
    ref = torch.ones(1000)
    many_small = cx.compare(ref + 0.02, ref, TOL, scale=torch.full((1000,), 1e3))
    assert many_small.n_bad == 0 and not many_small.passed and "rel_l2 0.02 > 0.01" in many_small.describe(TOL)
    out = ref.clone()
    out[3] = 40.0
    st = cx.compare(out, ref, TOL, scale=torch.full((1000,), 5.0))
    text = st.describe(TOL)
    assert "1 of 1000 elements exceed |out-ref| <= 0.25 + 0.02*max(|ref|, scale)" in text
    assert "worst at index [3]" in text and "(scale 5)" in text
    hidden = st.describe(TOL, detail=False)
    assert "max(|ref|, scale)" in hidden and "[3]" not in hidden and "1000" not in hidden
    assert "*|ref|" in cx.compare(out, ref, TOL).describe(TOL)       # no scale: today's bound, today's words


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_never_pass_whatever_the_scale(bad):
    ref = torch.ones(10)
    out = ref.clone()
    out[7] = bad
    st = cx.compare(out, ref, TOL, scale=torch.full((10,), 1e30))
    assert not st.passed and st.n_nonfinite == 1


@pytest.mark.parametrize("scale, why", [
    (torch.tensor([1.0, math.nan, 1.0]), "NaN"),
    (torch.tensor([1.0, math.inf, 1.0]), "Inf"),
    (torch.tensor([1.0, -1.0, 1.0]), "negative"),
    (torch.ones(4), "shape"),
])
def test_a_broken_scale_is_a_harness_error_never_a_pass(scale, why):
    ref = torch.ones(3)
    with pytest.raises(cx.HarnessError, match="scale"):
        cx.compare(ref + 5.0, ref, TOL, scale=scale)


# ---- a tiny operator with a scale, through results and the sandbox ------------------------------
# cancel_sum(x, y) = x + y, where every 32nd element cancels: x ~ 10, y ~ -x + N(0, 1). Its scale is
# |x| + |y|. A kernel that rounds each summand to bf16 before adding is off by less than 2^-7 of the
# summands (one bf16 step: Triton's interpreter truncates): within rtol = 1e-2 of the scale, outside it of
# |ref| ~ 1 where they cancel; rel_l2 passes either way. cancel_sum_plain: the same operator, no scale.
_OPERATOR = '''
import torch
from benchmarks.spec import Tolerance

NAME = "{name}"
SIGNATURE = "{name}(x[N], y[N]) -> [N]"
ARGS = ("x", "y")
DESCRIPTION = "out = x + y, elementwise; every 32nd pair nearly cancels"
TOLERANCES = {{"fp32": Tolerance(1e-4, 1e-2, 1e-2), "bf16": Tolerance(1e-4, 1e-2, 1e-2)}}


def make_inputs(dims, dtype, seed, device="cpu"):
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    n = int(dims["N"])
    x = torch.randn(n, generator=g, device=device)
    y = torch.randn(n, generator=g, device=device)
    x[::32] = 10.0 + torch.rand(x[::32].shape, generator=g, device=device)
    y[::32] = -x[::32] + torch.randn(x[::32].shape, generator=g, device=device)
    return {{"x": x, "y": y}}


def reference(x, y):
    return x + y
{scale}

def output_spec(dims, dtype):
    return (int(dims["N"]),), "fp32"


def work(dims, dtype):
    return {{"fp32": float(dims["N"])}}, 12.0 * int(dims["N"])


def interpreter_dims(dims):
    return dict(dims)


def holdout_dims(rng, hot_dims):
    return [{{"N": 301}}]


def occurrences(model_cfg, tp, tokens):
    return []
'''

_SCALE = '''

def reference_with_scale(x, y):
    return x + y, x.abs() + y.abs()
'''

CANDIDATE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _cancel_sum_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    out = x.to(tl.bfloat16).to(tl.float32) + y.to(tl.bfloat16).to(tl.float32)
    #DEFECT
    tl.store(o_ptr + offs, out, mask=mask)


def NAME(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _cancel_sum_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    return out
'''


@pytest.fixture(scope="module")
def op_dir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("scale_ops")
    for name, scale in (("cancel_sum", _SCALE), ("cancel_sum_plain", "")):
        (root / name).mkdir()
        (root / name / "operator.py").write_text(_OPERATOR.format(name=name, scale=scale))
    return str(root)


def _evaluate(op: str, op_dir: str, defect: str = ""):
    source = CANDIDATE.replace("def NAME", f"def {op}").replace("    #DEFECT", defect)
    req = make_request(op, source, (Shape.make("s0", {"N": 256}, dtype="fp32"),), trials=2, timeout_s=120.0,
                       interpreter=True)
    return evaluate_unlinted(req, operator_dir=op_dir)


def _bf16_summands(inp: dict) -> torch.Tensor:
    """The candidate's numerics in PyTorch (round-to-nearest bf16 summands, fp32 add)."""
    return inp["x"].bfloat16().float() + inp["y"].bfloat16().float()


def test_expected_takes_the_scale_from_the_parents_reference_and_judge_applies_it(op_dir):
    spec, plain = cx.load_spec("cancel_sum", op_dir), cx.load_spec("cancel_sum_plain", op_dir)
    inp = spec.make_inputs({"N": 256}, "fp32", 3)
    exp = results.expected(spec, inp, {"N": 256}, "fp32", 3)
    assert torch.equal(exp.scales[0], inp["x"].abs() + inp["y"].abs())
    assert results.expected(plain, inp, {"N": 256}, "fp32", 3).scales is None
    out = _bf16_summands(inp)
    assert results.judge(spec, [out], exp, "fp32")[0] is None
    why = results.judge(plain, [out], results.expected(plain, inp, {"N": 256}, "fp32", 3), "fp32")[0]
    assert why and "exceed |out-ref| <= 0.0001 + 0.01*|ref|" in why      # so the scale is what passes it
    dropped = out.clone()
    dropped[::32] = inp["x"][::32]                   # the cancelling term left out: still far outside
    why = results.judge(spec, [dropped], exp, "fp32")[0]
    assert why and "max(|ref|, scale)" in why


def test_a_scale_of_the_wrong_form_is_a_harness_error(tmp_path):
    root = tmp_path / "ops"
    (root / "cancel_sum").mkdir(parents=True)
    (root / "cancel_sum" / "operator.py").write_text(_OPERATOR.format(
        name="cancel_sum", scale=_SCALE.replace("x.abs() + y.abs()", "(x.abs() + y.abs())[:-1]")))
    spec = cx.load_spec("cancel_sum", str(root))
    with pytest.raises(cx.HarnessError, match="scale of out"):
        results.expected(spec, spec.make_inputs({"N": 64}, "fp32", 0), {"N": 64}, "fp32", 0)


@pytest.mark.interpreter
def test_through_the_sandbox_rounded_summands_pass_with_the_scale_only(op_dir):
    res = _evaluate("cancel_sum", op_dir)
    assert res.accepted, res.reasons
    assert all(s.error is None for s in res.shapes) and any(s.holdout for s in res.shapes)
    plain = _evaluate("cancel_sum_plain", op_dir)
    assert not plain.accepted and plain.failed_stage == "correctness"
    assert "0.0001 + 0.01*|ref|" in plain.reasons[0]


@pytest.mark.interpreter
@pytest.mark.parametrize("defect", [
    "    out = tl.where(offs % 32 == 0, x, out)",           # drops the cancelling term
    "    out = tl.where(offs % 32 == 0, x + 0.9 * y, out)",  # a wrong weight on it
    "    out = tl.where(offs == 5, x, out)",                # drops one ordinary term
], ids=["drop-cancelling", "wrong-weight", "drop-one"])
def test_through_the_sandbox_a_wrong_sum_still_fails_with_the_scale(op_dir, defect):
    res = _evaluate("cancel_sum", op_dir, defect)
    assert not res.accepted and res.failed_stage == "correctness"
    assert "max(|ref|, scale)" in res.reasons[0]
