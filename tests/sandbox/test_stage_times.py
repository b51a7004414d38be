"""Stage clock, the order of the breakdown, and the A/B schedule (pure; nothing is timed)."""
import pytest

from sandbox.ab import MAX_CALLS, calls_per_graph, round_order
from sandbox.stage_times import StageClock, breakdown_lines, ordered
from sandbox.verdict import EvalResult


def test_clock_adds_repeated_stages_and_merges_worker_reports():
    c = StageClock()
    c.add("correctness", 1.0)
    c.add("correctness", 0.5)
    assert c.merge({"imports": 2.0, "cuda_init": 0.25, "bogus": -1}) == pytest.approx(2.25)
    assert dict(c.freeze()) == {"correctness": 1.5, "imports": 2.0, "cuda_init": 0.25}
    with pytest.raises(ValueError):
        c.add("lint", -0.1)


def test_breakdown_orders_stages_and_lists_kernel_compiles_under_the_gate():
    times = (("correctness", 3.0), ("compile.kernel._k#0", 0.4), ("imports", 2.0), ("compile.gate", 0.5),
             ("mystery", 0.1))
    names = [k for k, _ in ordered(times)]
    assert names == ["imports", "compile.gate", "compile.kernel._k#0", "correctness", "mystery"]
    lines = breakdown_lines(times, wall_s=6.0)
    assert lines[-1].split()[-2] == "6.000"
    other = next(line for line in lines if "(other)" in line)
    assert float(other.split()[1]) == pytest.approx(0.4)    # 6.0 - (2 + 0.5 + 3 + 0.1): kernels not double-counted


def test_stage_times_survive_the_json_round_trip():
    r = EvalResult(op="x", stage_times=(("lint", 0.1), ("compile.gate", 1.5)))
    back = EvalResult.from_json(__import__("json").loads(__import__("json").dumps(r.to_json())))
    assert back.stage_times == r.stage_times


def test_ab_rounds_alternate_so_neither_kernel_always_goes_first():
    order = round_order(6)
    assert order == [(0, 1), (1, 0)] * 3
    assert sum(first == 0 for first, _ in round_order(31)) == 16


def test_calls_per_graph_grow_for_short_calls_and_cover_every_input_set():
    assert calls_per_graph(2e-3, 4) == 4          # a long call: one per input set
    assert calls_per_graph(2e-6, 4) == MAX_CALLS  # a tiny call: as many as allowed
    assert calls_per_graph(0.0, 4) == MAX_CALLS
    assert calls_per_graph(1e-3 / 6, 4) == 6


def test_parts_after_a_slash_sit_under_their_stage_and_are_not_added_to_the_total():
    times = (("holdouts/worker.call", 2.0), ("correctness", 1.0), ("holdouts", 3.0), ("references/judge", 0.5),
             ("references", 0.75), ("odd/part", 0.1), ("odd", 0.2))
    names = [k for k, _ in ordered(times)]
    assert names == ["references", "references/judge", "correctness", "holdouts", "holdouts/worker.call", "odd",
                     "odd/part"]
    other = next(line for line in breakdown_lines(times, wall_s=5.0) if "(other)" in line)
    assert float(other.split()[1]) == pytest.approx(0.05)   # 5.0 - (1 + 3 + 0.75 + 0.2)
