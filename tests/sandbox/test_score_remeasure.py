"""sandbox/gpu_gates.py _score: a shape whose measured time is at or below 0 is the timer's failure, re-measured in a
fresh worker like a time that beat T_ref; twice not a time rejects the evaluation at timing with both readings and
the hold counts, never a bare ValueError from the scoring (session 37: a 36 us kernel read -1.3 us beside a busy
host, and the loop recorded "sandbox raised ValueError").

The parent's decisions run here; the worker's re-measure is a function that returns given times (this machine has
no GPU to time on)."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from benchmarks.spec import Shape
from sandbox.correctness import Rejected
from sandbox.gpu_gates import GpuGates
from sandbox.verdict import EvalResult, ShapeResult


class Gates(GpuGates):
    def __init__(self, first_us: dict[str, float], again_us: dict[str, float]):
        self.req = SimpleNamespace(shapes=[Shape.make(k, {"T": 1}) for k in first_us])
        self.rows = [ShapeResult(id=k, dims={"T": 1}, dtype="bf16", weight=1.0, t_us=t, t_roof_us=0.5,
                                 t_floor_us=1.5) for k, t in first_us.items()]
        self.result = EvalResult(op="rms_norm", shapes=self.rows)
        self.result.environment["timing_hold"] = {"batches": 8, "held": 6, "retried": 2, "unheld": 2}
        self.again_us, self.remeasured = again_us, []

    def _timed(self, stage):
        return contextlib.nullcontext()

    def _setup(self):
        return {}

    def _in_worker(self, body, setup):
        body(None)

    def _time(self, w, shapes, rows):
        for s, r in zip(shapes, rows):
            self.remeasured.append(s.id)
            r.t_us = self.again_us[s.id]


def test_a_time_at_or_below_zero_is_measured_again_and_scored_on_the_second_reading():
    g = Gates({"T1": -1.3, "T2": 3.0}, {"T1": 3.2})
    g._score()
    assert g.remeasured == ["T1"]
    assert g.rows[0].t_us == 3.2 and g.rows[0].attainment == pytest.approx(1.5 / 3.2)
    assert any("the timer read -1.30 us; re-measured in a fresh worker: 3.20 us" in r for r in g.result.reasons)
    assert not g.rows[0].suspect


def test_twice_not_a_time_rejects_at_timing_with_both_readings_and_the_hold_counts():
    g = Gates({"T1": -1.3}, {"T1": 0.0})
    with pytest.raises(Rejected) as e:
        g._score()
    assert e.value.stage == "timing"
    assert "the timer read -1.30 us, then 0.00 us in a fresh worker" in e.value.reason
    assert "'unheld': 2" in e.value.reason


def test_a_time_that_beats_t_ref_is_still_remeasured_and_flagged():
    g = Gates({"T1": 1.0}, {"T1": 1.2})
    g._score()
    assert g.remeasured == ["T1"] and g.rows[0].suspect
    assert any("beat T_ref" in f for f in g.result.flags)
