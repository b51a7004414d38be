"""`--weights FILE` (a weights file of `aka weights --from-trace`) in every command that weighs shapes or operators:
aka bench, aka optimize (the score the run climbs), aka nightly (option and config key); aka report's is tested
with its trail in test_report_html.py. A file that moves all weight to one shape must reach what is scored."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from weights_files import entry, write_weights

from agent.audit import Audit
from benchmarks.registry import load_operator
from benchmarks.spec import Shape

sys.path.insert(0, str(Path(__file__).parent))
RMS = load_operator("rms_norm")


def invoke(*args):
    from agent.cli import app
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_a_bad_file_is_a_usage_error_in_every_command(tmp_path):
    bad = write_weights(tmp_path / "bad.json", [{**entry("rms_norm", RMS.shapes[0], 1.0), "op": "flash_attn"}])
    plan = tmp_path / "n.yaml"
    plan.write_text("operators: [{op: rms_norm, iterations: 1}]\nweights: bad.json\n")
    home = ("-c", f"home={tmp_path / 'home'}")
    for args in (("bench", "--op", "rms_norm", "--weights", bad), ("bench", "--all", "--weights", bad),
                 ("optimize", "--op", "rms_norm", "--weights", bad), ("report", "--out", tmp_path, "--weights", bad),
                 ("nightly", "--config", plan)):
        r = invoke(*args, *home)
        assert r.exit_code == 2 and "aka does not know: flash_attn" in " ".join(r.output.split()), (args, r.output)


@pytest.mark.interpreter
def test_bench_scores_the_shapes_with_the_files_weights(tmp_path):
    decode = RMS.select("decode")[:2]
    one = decode[1]
    w = write_weights(tmp_path / "w.json", [entry("rms_norm", one, 1.0)])
    shapes = tmp_path / "s.json"
    r = invoke("bench", "--op", "rms_norm", "--shape-set", "decode", "--weights", w, "--json", shapes,
               "-c", f"home={tmp_path}", "-c", "sandbox.trials=1", "-c", "sandbox.holdout=false")
    assert r.exit_code == 0, r.output
    rows = {s["id"]: s["weight"] for s in json.loads(shapes.read_text())["shapes"]}
    assert rows[one.id] == 1.0 and sum(rows.values()) == 1.0 and len(rows) == len(RMS.select("decode"))


@pytest.mark.interpreter
def test_optimize_records_and_climbs_the_files_shape_weights(tmp_path):
    from test_cli_optimize import tiny_shapes
    from test_loop import make_candidates
    cands = make_candidates(tmp_path / "cands")
    prefill = Shape.make("x", {"T": 4, "H": 96}, dtype="fp32", phase="prefill")
    w = write_weights(tmp_path / "w.json", [entry("rms_norm", prefill, 0.7)])
    home = tmp_path / "home"
    c = ["-c", f"home={home}", "-c", "knowledge.enabled=false", "-c", "sandbox.trials=1", "-c", "sandbox.holdout=false"]
    r = invoke("optimize", "--op", "rms_norm", "--shapes", tiny_shapes(tmp_path), "--weights", w, "--proposer",
               "scripted", "--script", cands["faster.py"], "--iterations", "1", *c)
    assert r.exit_code == 0, r.output
    with Audit(home / "audit.db") as audit:
        (start,) = audit.records(kind="run_start")
    assert {s["id"]: s["weight"] for s in start.body["shapes"]} == {"tiny-decode": 0.0, "tiny-prefill": 0.7}
    r = invoke("optimize", "--resume", start.run_id, "--weights", w, *c)
    assert r.exit_code == 2 and "keeps the shape weights it started with" in r.output


def test_nightly_weighs_its_operators_with_the_file(tmp_path):
    from agent.nightly import NightState, load_plan, summarize
    from agent.report_html.data import IterationPoint, RunReport
    from benchmarks.weights_file import load_weights_file
    from sandbox.verdict import EvalResult
    silu = load_operator("silu_and_mul")
    w = write_weights(tmp_path / "w.json", [entry("silu_and_mul", silu.shapes[0], 0.5)])
    (tmp_path / "n.yaml").write_text("operators: [{op: rms_norm, iterations: 1}, {op: silu_and_mul, iterations: 1}]\n"
                                     "weights: w.json\n")
    plan = load_plan(tmp_path / "n.yaml")
    assert plan.weights == w.resolve()
    odd = write_weights(tmp_path / "odd.json", [{**entry("rms_norm", RMS.shapes[0], 1.0), "dims": {"T": 37, "H": 8}}])
    r = invoke("nightly", "--config", tmp_path / "n.yaml", "--weights", odd, "-c", f"home={tmp_path / 'home'}")
    assert r.exit_code == 2 and "none of its" in r.output and not (tmp_path / "home" / "nightly").exists()

    def run(op, before, after):
        seed, final = EvalResult(op=op, s_i=before), EvalResult(op=op, s_i=after)
        point = IterationPoint(0, before, "accepted", True, None, "seed", "", True)
        return RunReport(f"{op}-1", op, "hot", "search", None, "2026-12-01T00:00:00", "budget", {}, 4.8, (), seed,
                         final, 1, "sha", (point,), ())

    state = NightState("n1", tmp_path, [{"op": j.op, "status": "done", "run_id": f"{j.op}-1", "exit_code": 0}
                                        for j in plan.jobs])
    reports = {"rms_norm": run("rms_norm", 0.2, 0.3), "silu_and_mul": run("silu_and_mul", 0.6, 0.9)}
    plain = summarize(state, reports, plan, None, tmp_path)
    traced = summarize(state, reports, plan, None, tmp_path, load_weights_file(plan.weights))
    assert traced["s_agg_after"] == pytest.approx(0.9) and traced["s_agg_before"] == pytest.approx(0.6)
    assert plain["s_agg_after"] != pytest.approx(0.9) and traced["w_i"] == {"rms_norm": 0.0, "silu_and_mul": 0.5}
    from agent.nightly import summary_markdown
    assert f"w_i from the weights file {plan.weights}" in summary_markdown(traced)


@pytest.mark.gpu
def test_on_a_gpu_all_weight_on_one_shape_makes_the_weighted_attainment_that_shapes(tmp_path):
    decode = RMS.select("decode")
    one = decode[0]
    w = write_weights(tmp_path / "w.json", [entry("rms_norm", one, 1.0)])
    out = tmp_path / "r.json"
    r = invoke("bench", "--op", "rms_norm", "--shape-set", "decode", "--weights", w, "--json", out,
               "-c", f"home={tmp_path}")
    assert r.exit_code == 0, r.output
    rec = json.loads(out.read_text())
    row = next(s for s in rec["shapes"] if s["id"] == one.id)
    assert rec["weighted_attainment"] == pytest.approx(row["attainment"]) and "weighted attainment" in r.output
