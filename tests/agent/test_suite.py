"""`aka bench --all`: the suite's table and record, S_agg by hand, which kernel stands for each operator."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.audit import Audit
from agent.suite import KernelChoice, SuiteError, pick_operators, resolve_kernels, score_suite
from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.roofline import roofline
from sandbox.verdict import EvalResult, ShapeResult

sys.path.insert(0, str(Path(__file__).parent))


def gpu_result(op: str, times_over_roof: dict[str, float], hw, failed: tuple[str, ...] = ()) -> EvalResult:
    """An EvalResult as the sandbox returns it on a GPU: each shape timed at `k` times its T_roof."""
    from benchmarks.scoring import operator_score, score_shape
    spec = load_operator(op)
    rows, scores = [], []
    for shape in spec.select("hot"):
        rl = roofline(*spec.work(shape), hw)
        k = times_over_roof.get(shape.id, 2.0)
        t = None if shape.id in failed else rl.t_roof_s * k
        sc = score_shape(shape.id, shape.weight, t, rl.t_roof_s, 1.3e-6)
        scores.append(sc)
        rows.append(ShapeResult(id=shape.id, dims=shape.dim, dtype=shape.dtype, weight=shape.weight,
                                t_us=None if t is None else t * 1e6, t_roof_us=rl.t_roof_s * 1e6, t_floor_us=1.3,
                                attainment=sc.attainment, bound=rl.bound, timing_mode="graph",
                                error="correctness: max_rel_err 3.1 > 0.02" if shape.id in failed else None))
    res = EvalResult(op=op, verdict="rejected" if failed else "accepted", shapes=rows, hardware=hw.name,
                     s_i=operator_score(scores), failed_stage="correctness" if failed else None,
                     reasons=["correctness failed on 1 shape"] if failed else [])
    return res


def test_s_agg_is_the_weighted_sum_of_medians_and_a_rejected_kernel_scores_zero():
    hw = load_hardware("h200")
    calibrated = hw.with_calibration({"bandwidth_tbs": 4.0, "peaks_tflops": {"bf16": 700.0}})
    results = {"fused_add_rms_norm": gpu_result("fused_add_rms_norm", {}, hw),                       # 2x roof; most hot shapes prefill
               "silu_and_mul": gpu_result("silu_and_mul", {}, hw, failed=("x",))}
    choices = {op: KernelChoice(op, "seed", "src") for op in results}
    score = score_suite("hot", choices, results, {"fused_add_rms_norm": 3.0, "silu_and_mul": 1.0}, hw, calibrated)
    by = {o.op: o for o in score.operators}
    assert by["fused_add_rms_norm"].s_i == pytest.approx(0.5, abs=0.06)        # median of T_ref/T where most T_ref = T_roof
    assert by["silu_and_mul"].s_i == 0.0                              # rejected: counts 0, never dropped
    assert by["fused_add_rms_norm"].weight == pytest.approx(0.75)
    assert score.s_agg == pytest.approx(0.75 * by["fused_add_rms_norm"].s_i)
    # the calibrated ceilings are lower, so the same times attain more of them
    assert by["fused_add_rms_norm"].s_i_other > by["fused_add_rms_norm"].s_i and score.s_agg_other > score.s_agg
    assert score.other == "h200 calibrated" and score.primary == "h200 datasheet"
    rec = json.loads(json.dumps(score.to_json()))
    assert rec["kind"] == "suite" and [o["op"] for o in rec["operators"]] == ["fused_add_rms_norm", "silu_and_mul"]


def test_failed_shapes_are_listed_and_missing_weights_are_an_error():
    hw = load_hardware("h200")
    spec = load_operator("rms_norm")
    bad = spec.select("hot")[0].id
    results = {"rms_norm": gpu_result("rms_norm", {}, hw, failed=(bad,))}
    score = score_suite("hot", {"rms_norm": KernelChoice("rms_norm", "seed", "x")}, results, {"rms_norm": 1.0}, hw)
    assert [s for s, _ in score.operators[0].failed_shapes] == [bad]
    assert score.s_agg_other is None
    with pytest.raises(SuiteError, match="no weight for operator"):
        score_suite("hot", {"rms_norm": KernelChoice("rms_norm", "seed", "x")}, results, {"gemm": 1.0}, hw)


def test_operators_come_from_the_registry_and_unknown_names_are_refused():
    known = ["a_op", "b_op", "c_op"]
    assert pick_operators(known, []) == known
    assert pick_operators(known, ["c_op,a_op"]) == ["a_op", "c_op"]
    with pytest.raises(SuiteError, match="no such operator.*known: a_op"):
        pick_operators(known, ["a_op", "nope"])


def test_kernels_from_a_folder_and_from_runs_in_the_audit_trail(tmp_path):
    seeds = {op: load_operator(op).seed_path for op in ("rms_norm", "silu_and_mul")}
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "rms_norm.py").write_text("# exported rms_norm\n")
    got = resolve_kernels([str(folder)], list(seeds), seeds)
    assert got["rms_norm"].label == str(folder / "rms_norm.py") and got["silu_and_mul"].label == "seed"

    audit = Audit(tmp_path / "audit.db")
    for run, score, text in (("rms_norm-a", 0.7, "# run a\n"), ("rms_norm-b", 0.6, "# run b\n")):
        sha = audit.put_source(text)
        audit.append(run, "run_start", {"op": "rms_norm", "shape_set": "hot", "proposer": "search"})
        audit.append(run, "accepted", {"iteration": 3, "source_sha256": sha, "score": score, "seed": False})
    got = resolve_kernels(["rms_norm-a", "rms_norm-b"], list(seeds), seeds, audit)
    assert got["rms_norm"].source == "# run a\n"                     # the higher recorded score wins
    assert got["rms_norm"].label == "run rms_norm-a iteration 3"
    assert resolve_kernels(["last"], ["silu_and_mul"], seeds, audit)["silu_and_mul"].label == "seed"
    with pytest.raises(SuiteError, match="no run 'nope'"):
        resolve_kernels(["nope"], list(seeds), seeds, audit)
    audit.close()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SuiteError, match="none of"):
        resolve_kernels([str(tmp_path / "empty")], list(seeds), seeds)


def _app():
    from agent.cli import app
    return app


def test_usage_errors_exit_2(tmp_path):
    home = f"home={tmp_path}"
    runner = CliRunner()
    for args, needle in ((["bench"], "--all"), (["bench", "--all", "--op", "rms_norm"], "pick one"),
                         (["bench", "--all", "--ops", "nope"], "no such operator"),
                         (["bench", "--all", "--baseline", "numpy"], "choose one of"),
                         (["bench", "--all", "--kernels", "norun"], "no audit trail")):
        r = runner.invoke(_app(), [*args, "-c", home])
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.output, (args, r.output)


@pytest.mark.interpreter
def test_bench_all_on_two_operators_under_the_interpreter(tmp_path):
    """Real sandbox evaluations: the seeds pass, a wrong kernel in --kernels fails with its shapes named."""
    from test_loop import make_candidates
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "rms_norm.py").write_text(make_candidates(tmp_path / "c")["wrong.py"].read_text())
    out = tmp_path / "suite.json"
    args = ["bench", "--all", "--ops", "rms_norm,silu_and_mul", "--shape-set", "decode", "--json", str(out),
            "-c", f"home={tmp_path / 'home'}", "-c", "sandbox.trials=1", "-c", "sandbox.holdout=false"]
    r = CliRunner().invoke(_app(), args + ["--kernels", str(folder)])
    assert r.exit_code == 1, r.output
    rec = json.loads(out.read_text())
    by = {o["op"]: o for o in rec["operators"]}
    assert rec["interpreter"] is True and rec["s_agg"] is None
    assert "not scored" in r.output
    assert by["rms_norm"]["verdict"] == "rejected" and by["rms_norm"]["failed_stage"] == "correctness"
    assert by["rms_norm"]["kernel"] == str(folder / "rms_norm.py")
    assert by["silu_and_mul"]["verdict"] == "accepted" and by["silu_and_mul"]["kernel"] == "seed"
    assert sum(o["weight"] for o in rec["operators"]) == pytest.approx(1.0)
    assert by["rms_norm"]["failed_shapes"] or by["rms_norm"]["reasons"]
