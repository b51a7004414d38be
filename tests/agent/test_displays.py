"""Displays that agree: one weight (the share of the shown set), `not run` for a kernel stopped at lint,
hot dims and the dims that ran kept apart, titles that are not rich markup, costs with enough digits."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from agent.feedback import build_feedback
from agent.progress import summary_rows, summary_table
from agent.report import set_shares, shape_table
from agent.types import format_usd
from benchmarks.registry import load_operator
from benchmarks.scoring import normalize
from sandbox.verdict import EvalResult, ShapeResult


def render(renderable) -> str:
    buf = io.StringIO()
    Console(file=buf, width=250, force_terminal=False).print(renderable)
    return buf.getvalue()


def rows(spec, shapes, **kw):
    return [ShapeResult(s.id, dict(s.dim), s.dtype, s.weight, **kw) for s in shapes]


def test_every_display_shows_the_weight_aka_shapes_shows():
    spec = load_operator("rms_norm")
    chosen = spec.select("decode")
    expected = normalize({s.id: s.weight for s in chosen})       # what `aka shapes` and the system prompt show
    result = EvalResult(op="rms_norm", verdict="accepted", shapes=rows(spec, chosen, t_us=1.0, attainment=0.5))
    assert set_shares(result.shapes) == pytest.approx(expected)
    first = chosen[0]
    shown = f"{expected[first.id]:.3f}"
    assert shown in render(shape_table(result, "t"))
    assert shown in render(summary_table(summary_rows(result, result), "t"))
    assert f"w={shown}" in build_feedback(None, result)


def test_a_kernel_rejected_at_lint_shows_its_shapes_as_not_run():
    spec = load_operator("rms_norm")
    result = EvalResult(op="rms_norm", verdict="rejected", failed_stage="lint", reasons=["torch.sum computes the result"],
                        shapes=rows(spec, spec.select("hot")))
    table = render(shape_table(result, "t"))
    assert "not run (rejected at lint)" in table and " ok" not in table
    text = build_feedback(None, result)
    assert "not run (rejected at lint)" in text and "passed" not in text


def test_titles_keep_their_brackets():
    result = EvalResult(op="rms_norm", verdict="accepted", shapes=[ShapeResult("a", {"T": 1}, "fp32", 1.0)])
    assert "rms_norm [decode] seed.py" in render(shape_table(result, "rms_norm [decode] seed.py"))
    assert "rms_norm [decode] run-1" in render(summary_table(summary_rows(result, result), "rms_norm [decode] run-1"))


def test_costs_under_a_cent_are_not_zero():
    assert format_usd(0.0042) == "$0.0042" and format_usd(0.0) == "$0.00" and format_usd(3.14159) == "$3.14"
    from agent.budget import BudgetLimits, BudgetUsed
    assert "usd 0.0042" in BudgetUsed(usd=0.0042).line(BudgetLimits())


@pytest.mark.interpreter
def test_a_record_keeps_the_hot_dims_and_separately_the_dims_that_ran():
    """The real sandbox under the interpreter, on a candidate the lint rejects (nothing runs: fast)."""
    from benchmarks.hardware import load_hardware
    from sandbox import EvalRequest, evaluate
    from sandbox.settings import SandboxSettings
    spec = load_operator("gemm")
    shape = spec.select("hot")[0]
    src = "import torch\n\ndef gemm(a, b):\n    return torch.matmul(a, b)\n"
    result = evaluate(EvalRequest(op="gemm", source=src, shapes=(shape,), hardware=load_hardware("h200"),
                                  settings=SandboxSettings(trials=1, holdout=False)))
    row = result.shapes[0]
    assert result.failed_stage == "lint"
    assert row.dims == dict(shape.dim)                                   # the hot shape, as t_roof_us is
    assert row.ran_dims == spec.interpreter_dims(shape.dim) != row.dims  # what the interpreter would run
    assert EvalResult.from_json(result.to_json()).shapes[0].ran_dims == row.ran_dims
    assert "ran at " + " ".join(f"{k}={v}" for k, v in row.ran_dims.items()) in render(shape_table(result, "t"))


@pytest.mark.interpreter
def test_bench_progress_names_each_stage_and_shape_and_prints_one_line_per_stage_when_piped(tmp_path):
    """The real sandbox under the interpreter on the seed at one tiny shape; the hook is the only observer."""
    from agent.progress import StageProgress
    from benchmarks.hardware import load_hardware
    from benchmarks.spec import Shape
    from sandbox import EvalRequest, evaluate
    from sandbox.settings import SandboxSettings
    spec = load_operator("rms_norm")
    calls = []
    shape = Shape.make("tiny", {"T": 2, "H": 64}, dtype="fp32", weight=1.0)
    result = evaluate(EvalRequest(op="rms_norm", source=open(spec.seed_path).read(), shapes=(shape,),
                                  hardware=load_hardware("h200"),
                                  settings=SandboxSettings(trials=1, holdout=True)),
                      progress=lambda stage, what: calls.append((stage, what)))
    assert result.accepted, result.reasons
    stages = [s for s, _ in calls]
    assert stages[0] == "lint" and "compile" in stages and "correctness" in stages
    assert ("correctness", "correctness trials of shape tiny") in calls
    assert all("holdout" not in what for _, what in calls) and ("correctness", "a hidden shape") in calls
    buf = io.StringIO()
    with StageProgress(Console(file=buf, force_terminal=False)) as p:
        for stage, what in calls:
            p(stage, what)
    lines = buf.getvalue().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == list(dict.fromkeys(stages))   # one line per stage
