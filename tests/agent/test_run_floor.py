"""One latency floor per run (agent/run_floor.py): the loop compares every score against the floor its trail
recorded first, not the floor each evaluation's process happened to read.

Fast: a real SQLite trail and the real loop, with a stand-in evaluator whose processes read different floors
(as session 36's search on an H100 did: 0.98-1.66 us in one run) while its kernel times say which is faster."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent import records as R
from agent.audit import Audit
from agent.budget import BudgetLimits
from agent.cli_optimize import contract_for
from agent.config import load_config
from agent.loop import Loop, RunPlan
from agent.progress import Progress
from agent.run_floor import measured_floor_us, pin_floor
from agent.state import restore
from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.spec import Shape
from sandbox.verdict import EvalResult, ShapeResult

OP = "rms_norm"
SHAPES = (Shape.make("dec-a", {"T": 16, "H": 512}, dtype="bf16", weight=2.0),
          Shape.make("dec-b", {"T": 64, "H": 512}, dtype="bf16", weight=1.0))
SEED = Path(load_operator(OP).seed_path).read_text()
FASTER = SEED + "\n# a candidate: 0.9 of the seed's time on every shape\n"
T_ROOF_US = 0.05


def timed(times_us: dict[str, float], floor_us: float, holdout: bool = False) -> EvalResult:
    """A passing evaluation as the sandbox writes it: each row's time, T_roof, the process's floor and the
    attainment against that floor; S_i and the weighted attainment over the rows."""
    rows = [ShapeResult(s.id, dict(s.dim), s.dtype, s.weight, t_us=times_us[s.id], t_roof_us=T_ROOF_US,
                        t_floor_us=floor_us, attainment=min(1.0, max(T_ROOF_US, floor_us) / times_us[s.id]),
                        timing_mode="graph") for s in SHAPES]
    if holdout:
        rows.append(ShapeResult("hidden", {"T": 5, "H": 100}, "bf16", 0.0, holdout=True))
    total = sum(r.weight for r in rows)
    return EvalResult(op=OP, verdict="accepted", shapes=rows, s_i=sorted(r.attainment for r in rows[:2])[0],
                      weighted_attainment=sum(r.weight * r.attainment for r in rows if not r.holdout) / total)


class NoisyFloors:
    """The seed takes 3.0 us a shape and its processes read a floor of 1.5 us; the candidate takes 2.7 us
    (faster everywhere) and its processes read 1.0 us. Scored against its own floor the candidate reads
    1.0 / 2.7 = 0.37 against the seed's 1.5 / 3.0 = 0.50."""

    def __init__(self):
        self.calls = 0

    def __call__(self, req) -> EvalResult:
        self.calls += 1
        if req.baseline:                 # aka's own baselines (PyTorch), in processes that read 1.5 us too
            return timed({s.id: 9.0 for s in SHAPES}, 1.5)
        if req.source == SEED:
            return timed({s.id: 3.0 for s in SHAPES}, 1.5)
        return timed({s.id: 2.7 for s in SHAPES}, 1.0)


def make_loop(home: Path, candidates: list[str], evaluate, run_id: str = "run-1", extra: tuple = ()):
    from agent.proposers.scripted import ScriptedProposer
    files = []
    for k, text in enumerate(candidates):
        path = home.parent / f"cand{k}.py"
        path.write_text(text)
        files.append(str(path))
    cfg = load_config(None, [f"home={home}", "knowledge.enabled=false", "acceptance.repeats=3",
                             "acceptance.winner_holdouts=false", *extra])
    audit = Audit(cfg.audit_db)
    plan = RunPlan(op=OP, shape_set="test", shapes=SHAPES, hardware=load_hardware("h200"), seed_source=SEED,
                   seed_path="seed.py", limits=BudgetLimits(iterations=len(candidates) + 1), rng_seed=3)
    loop = Loop(plan, cfg, ScriptedProposer(files), audit, contract_for(load_operator(OP), SHAPES), run_id,
                evaluate=evaluate, progress=Progress(live=False))
    return loop, audit


def test_pin_floor_rescores_rows_s_i_and_the_weighted_attainment():
    r = timed({"dec-a": 2.0, "dec-b": 4.0}, 1.0, holdout=True)
    assert measured_floor_us(r) == 1.0
    assert pin_floor(r, 1.6) is r
    assert [row.t_floor_us for row in r.shapes[:2]] == [1.6, 1.6] and r.shapes[2].t_floor_us is None
    assert [row.attainment for row in r.shapes[:2]] == pytest.approx([0.8, 0.4])
    assert r.s_i == pytest.approx(0.6)                                  # the median of two
    assert r.weighted_attainment == pytest.approx((2 * 0.8 + 0.4) / 3)
    assert pin_floor(timed({"dec-a": 1.0, "dec-b": 4.0}, 1.0), 1.6).shapes[0].attainment == 1.0   # capped
    assert pin_floor(timed({"dec-a": 2.0, "dec-b": 4.0}, 1.0), 0.01).shapes[0].attainment == pytest.approx(
        T_ROOF_US / 2.0)                                                # T_ref = max(T_roof, T_floor)


def test_results_without_timings_or_without_a_floor_are_left_as_they_are():
    untimed = EvalResult(op=OP, verdict="accepted", interpreter=True,
                         shapes=[ShapeResult("dec-a", {"T": 16, "H": 512}, "bf16", 1.0, timing_mode="interpreter")])
    assert measured_floor_us(untimed) is None
    assert pin_floor(untimed, 1.5).shapes[0].attainment is None and untimed.shapes[0].t_floor_us is None
    r = timed({"dec-a": 2.0, "dec-b": 4.0}, 1.0)
    assert pin_floor(r, None).shapes[0].attainment == pytest.approx(0.5)
    assert pin_floor(None, 1.0) is None


def test_a_faster_candidate_whose_process_read_a_low_floor_is_accepted(tmp_path):
    """Before the run pinned one floor, this candidate was screened out (0.37 < 0.50 less 0.5%)."""
    evaluate = NoisyFloors()
    loop, audit = make_loop(tmp_path / "home", [FASTER], evaluate)
    out = loop.run()
    iterations = [r for r in R.typed(audit, "run-1") if isinstance(r, R.Iteration)]
    cand = iterations[1]
    assert cand.record.accepted, cand.decision
    assert cand.record.score == pytest.approx(1.5 / 2.7)              # scored against the seed's floor
    assert cand.record.per_shape == pytest.approx({"dec-a": 1.5 / 2.7, "dec-b": 1.5 / 2.7})
    assert out.incumbent_sha256 == cand.source_sha256
    assert out.s_i == pytest.approx(1.5 / 2.7)
    # the trail keeps what each process measured
    floors = [measured_floor_us(e.eval_result()) for e in R.typed(audit, "run-1") if isinstance(e, R.Evaluation)]
    assert floors[0] == 1.5 and 1.0 in floors
    assert [r["a_before"] for r in out.rows] == pytest.approx([0.5, 0.5])
    assert [r["a_after"] for r in out.rows] == pytest.approx([1.5 / 2.7] * 2)


def test_a_resumed_run_pins_the_same_floor_from_its_first_record(tmp_path):
    evaluate = NoisyFloors()
    loop, audit = make_loop(tmp_path / "home", [FASTER], evaluate)
    loop.run()
    st = restore(audit, "run-1")
    assert st.run_floor_us == 1.5 and st.run_floor.floors == [1.5, 1.5, 1.5]     # the seed's and two baselines'
    assert st.incumbent_result.weighted_attainment == pytest.approx(1.5 / 2.7)
    assert st.seed_result.weighted_attainment == pytest.approx(0.5)
    # every stored candidate result is on the run's floor, whatever its process read
    assert all(row.t_floor_us == 1.5 for res in st.results.values() for row in res.visible_shapes())


def test_the_one_worker_ab_scores_against_the_runs_floor_when_given():
    from agent.acceptance import round_scores
    from sandbox.ab import ABSeries
    shapes = [s for s in load_operator(OP).select("hot") if s.dim["T"] <= 256]   # T_roof far below 1 us
    ids = tuple(s.id for s in shapes)
    a = tuple((3e-6,) * 4 for _ in shapes)
    series = ABSeries(ids, a, a, 4, floor_s=1.0e-6)
    own, _ = round_scores(series, shapes, load_hardware("h200"), OP)
    pinned, _ = round_scores(series, shapes, load_hardware("h200"), OP, floor_us=1.5)
    assert own[0] == pytest.approx(1.0 / 3.0) and pinned[0] == pytest.approx(0.5)


def test_run_floors_reads_each_evaluations_floor_from_a_real_trail(tmp_path, capsys):
    from agent.studies.run_floors import floors_by_role, main
    loop, audit = make_loop(tmp_path / "home", [FASTER], NoisyFloors())
    loop.run()
    roles = floors_by_role(str(audit.path))
    assert roles["seed"] == [1.5] and roles["candidate"] == [1.0]
    capsys.readouterr()
    assert main([str(audit.path)]) == 0
    out = capsys.readouterr().out
    assert "seed 1.50;" in out and "baseline:eager 1.50;" in out and "candidate 1.00;" in out
    assert "ab_candidate n=3 min 1.00" in out
    assert main([]) == 2


def test_run_floors_reports_both_launches_of_the_floor_kernel_where_kept(tmp_path, capsys):
    from agent.studies.run_floors import floors_by_sm_clock, hold_counts, launch_floors, main

    class KeepsParts(NoisyFloors):
        def __call__(self, req):
            r = super().__call__(req)
            r.environment["floor_us"] = {"plain": measured_floor_us(r), "pdl": 1.7}
            r.environment["clocks_mhz"] = {"sm": 1980 if measured_floor_us(r) < 1.2 else 1755, "sm_max": 1980}
            r.environment["timing_hold"] = {"batches": 6, "held": 5, "retried": 1, "unheld": 1}
            return r

    loop, audit = make_loop(tmp_path / "home", [FASTER], KeepsParts())
    loop.run()
    parts = launch_floors(str(audit.path))
    assert set(parts["plain"]) == {1.5, 1.0} and set(parts["pdl"]) == {1.7}
    n = len(parts["plain"])
    assert hold_counts(str(audit.path)) == {"batches": 6 * n, "held": 5 * n, "retried": n, "unheld": n}
    capsys.readouterr()
    main([str(audit.path)])
    out = capsys.readouterr().out
    assert "the floor kernel launched plain n=" in out and f"timed batches batches {6 * n}, held {5 * n}" in out
    clocks = floors_by_sm_clock(str(audit.path))
    assert set(clocks) == {1755, 1980} and set(clocks[1980]) == {1.0} and set(clocks[1755]) == {1.5}
    assert "by SM clock 1755 MHz" in out


def test_the_runs_report_shows_seed_final_and_baselines_on_the_runs_floor(tmp_path):
    from agent.report_html.data import run_report
    loop, audit = make_loop(tmp_path / "home", [FASTER], NoisyFloors())
    loop.run()
    rep = run_report(audit, "run-1")
    assert rep.seed.s_i == pytest.approx(0.5) and rep.final.s_i == pytest.approx(1.5 / 2.7)   # raw: 1.0 / 2.7
    assert rep.baselines and all(row.t_floor_us == 1.5 for b in rep.baselines.values() for row in b.visible_shapes())


def test_a_candidates_process_never_sets_the_runs_floor():
    """In a --from-reference run the first timed evaluations are written by the proposer; the run's floor waits for
    a trusted process (the seed's or a baseline's), and then the results stored before it are rescored on it."""
    from agent.state import fold

    def evaluation(role, result, sha=None):
        return R.Evaluation(iteration=1, role=role, repeat=0, source_sha256=sha, baseline=None,
                            result=result.to_json(), gpu_s=1.0, wall_s=1.0, session=1)

    st = fold([evaluation("candidate", timed({"dec-a": 2.0, "dec-b": 2.0}, 1.0), "a" * 64)])
    assert st.run_floor_us is None and st.results["a" * 64].shapes[0].attainment == pytest.approx(0.5)
    st = fold([evaluation("baseline:eager", timed({"dec-a": 9.0, "dec-b": 9.0}, 1.6))], state=st)
    assert st.run_floor_us == 1.6 and st.results["a" * 64].shapes[0].attainment == pytest.approx(0.8)
    st = fold([evaluation("screen", timed({"dec-a": 2.0, "dec-b": 2.0}, 0.5))], state=st)
    assert st.run_floor_us == 1.6


def test_rescreen_replays_a_trails_screens_on_the_runs_floor(tmp_path, capsys):
    """The trail keeps each process's floor, so a run recorded before the fix can be replayed: the candidate's
    screen fails as recorded (1.0 / 2.7 against the bar's 1.5 / 3.0) and passes on the seed's floor."""
    from agent.studies.rescreen import main, replay
    loop, audit = make_loop(tmp_path / "home", [FASTER], NoisyFloors(), extra=("acceptance.timing_first=always",))
    loop.run()
    (row,) = replay(str(audit.path))
    assert (row["screens"], row["passed_as_recorded"], row["passed_on_run_floor"]) == (1, 0, 1)
    assert row["screened_out_only_as_recorded"] == 1 and row["passed_only_as_recorded"] == 0
    assert row["run_floor_us"] == 1.5
    capsys.readouterr()
    assert main([str(audit.path)]) == 0 and "| run-1 | 1 | 0 | 1 | 1 | 0 | 1.50 | 1.50 |" in capsys.readouterr().out


def test_the_runs_floor_is_the_median_of_its_first_trusted_iteration():
    """One outlier among the seed's and the baselines' floors does not move the run's floor; a trusted
    evaluation of a later iteration does not either."""
    from agent.run_floor import RunFloor
    rf = RunFloor()
    assert rf.floor_us is None
    assert not rf.offer("candidate", 0, timed({"dec-a": 2.0, "dec-b": 2.0}, 0.9))        # never a candidate
    assert rf.offer("seed", 0, timed({"dec-a": 2.0, "dec-b": 2.0}, 1.0)) and rf.floor_us == 1.0
    assert rf.offer("baseline:eager", 0, timed({"dec-a": 9.0, "dec-b": 9.0}, 1.5)) and rf.floor_us == 1.25
    assert rf.offer("baseline:compile", 0, timed({"dec-a": 4.0, "dec-b": 4.0}, 1.6)) and rf.floor_us == 1.5
    assert not rf.offer("baseline:liger", 3, timed({"dec-a": 4.0, "dec-b": 4.0}, 0.9)) and rf.floor_us == 1.5
    untimed = EvalResult(op=OP, verdict="accepted", shapes=[])
    fresh = RunFloor()
    assert not fresh.offer("seed", 0, untimed) and fresh.iteration is None      # an untimed seed leaves it open
    assert fresh.offer("baseline:eager", 0, timed({"dec-a": 9.0, "dec-b": 9.0}, 1.4)) and fresh.floor_us == 1.4

    def never():
        raise AssertionError("a candidate's result was read for the run's floor")

    trail = [("candidate", 0, never), ("seed", 0, lambda: timed({"dec-a": 2.0, "dec-b": 2.0}, 1.2)),
             ("baseline:eager", 0, timed({"dec-a": 9.0, "dec-b": 9.0}, 1.6))]
    assert RunFloor.of(trail).floor_us == pytest.approx(1.4)
