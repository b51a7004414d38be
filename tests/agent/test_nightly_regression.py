"""`aka nightly`'s regression flag compares last night's final kernel with tonight's on tonight's floor
(agent/nightly.py previous_on_this_floor): the same kernel measured on two nights whose processes read
different latency floors is not a regression; a kernel slower tonight is."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent.nightly import NightlyPlan, NightState, OperatorJob, summarize, summary_markdown
from agent.report_html.data import IterationPoint
from sandbox.verdict import EvalResult, ShapeResult

OP = "rms_norm"
IDS = ("dec-a", "dec-b", "dec-c")


def final(t_us: float, floor_us: float) -> EvalResult:
    rows = [ShapeResult(i, {"T": 16, "H": 512}, "bf16", 1.0, t_us=t_us, t_roof_us=0.05, t_floor_us=floor_us,
                        attainment=floor_us / t_us, timing_mode="graph") for i in IDS]
    return EvalResult(op=OP, verdict="accepted", shapes=rows, s_i=floor_us / t_us, weighted_attainment=floor_us / t_us)


def night(tmp_path, tonight: EvalResult, previous: dict | None) -> dict:
    state = NightState("20261208-020000", tmp_path,
                       [{"op": OP, "status": "done", "run_id": "run-2", "audit_seq_before": 0, "exit_code": 0}])
    run = SimpleNamespace(run_id="run-2", seed=tonight, final=tonight, accepted_count=0, interpreter=False,
                          end_reason="iterations budget reached",
                          iterations=(IterationPoint(0, tonight.weighted_attainment, "accepted", True, None, "seed",
                                                     "", True),))
    plan = NightlyPlan((OperatorJob(OP, {"shape_set": "hot"}),))
    return summarize(state, {OP: run}, plan, previous, tmp_path)


def last_night(tmp_path) -> dict:
    """Last night: 3.0 us at every shape, its processes read a floor of 1.65 us (S_i 0.55)."""
    return night(tmp_path, final(3.0, 1.65), None)


def test_the_same_kernel_under_a_lower_floor_is_not_a_regression(tmp_path):
    prev = last_night(tmp_path)
    assert prev["operators"][0]["t_us_after"] == {i: 3.0 for i in IDS}
    assert prev["operators"][0]["t_floor_us"] == 1.65
    s = night(tmp_path, final(3.0, 1.45), prev)          # S_i 0.483 tonight, 0.067 below last night's as recorded
    row = s["operators"][0]
    assert row["s_i_previous_night"] == pytest.approx(1.45 / 3.0) and row["previous_night_rescored"]
    assert not row["regressed"] and s["regressed"] == []
    assert "this night's T_roof and T_floor" in summary_markdown(s)


def test_a_kernel_slower_tonight_is_a_regression_on_either_floor(tmp_path):
    prev = last_night(tmp_path)
    s = night(tmp_path, final(3.3, 1.45), prev)
    assert s["operators"][0]["regressed"] and s["regressed"] == [OP]
    s = night(tmp_path, final(3.3, 1.80), prev)          # a higher floor tonight does not hide it
    assert s["operators"][0]["regressed"]


def test_a_previous_summary_without_times_is_compared_as_recorded(tmp_path):
    prev = last_night(tmp_path)
    del prev["operators"][0]["t_us_after"]              # a summary written before the times were kept
    s = night(tmp_path, final(3.0, 1.45), prev)
    row = s["operators"][0]
    assert row["s_i_previous_night"] == pytest.approx(0.55) and not row["previous_night_rescored"]
    assert row["regressed"]                               # what the flag said before: the floor's noise
    assert "this night's T_roof" not in summary_markdown(s)
