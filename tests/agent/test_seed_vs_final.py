"""agent/studies/seed_vs_final.py on the CPU: which kernels it takes from a real audit trail, the per-shape
table it computes from an A/B series, and the case with nothing to compare. (The A/B itself needs a GPU.)"""
import json

import pytest

from agent import records as R
from agent.audit import Audit
from agent.studies import seed_vs_final as svf
from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from sandbox.ab import ABSeries

SEED, FINAL = "# the seed\n", "# the final kernel\n"


def _run(audit: Audit, run_id: str, seed: str, final: str | None, shapes=()) -> None:
    start = R.RunStart(op="rms_norm", shape_set="hot", shapes=tuple(shapes), hardware="h200",
                       seed_source_sha256=audit.put_source(seed))
    audit.append(run_id, "run_start", start.to_json())
    if final is not None:
        audit.append(run_id, "run_end", R.RunEnd(reason="done", incumbent_sha256=audit.put_source(final)).to_json())


def test_the_kernels_come_from_the_audit_trail_and_the_default_is_the_newest_ended_run(tmp_path):
    with Audit(tmp_path / "audit.db") as audit:
        _run(audit, "r1", SEED, "# an older final\n")
        _run(audit, "r2", SEED, FINAL)
        _run(audit, "r3", SEED, None)                     # still running: no run_end
    run_id, start, seed, final = svf.run_kernels(tmp_path, None)
    assert (run_id, start.op, seed, final) == ("r2", "rms_norm", SEED, FINAL)
    assert svf.run_kernels(tmp_path, "r1")[3] == "# an older final\n"
    with pytest.raises(SystemExit, match="no run_end"):
        svf.run_kernels(tmp_path, "r3")


def test_a_run_that_accepted_nothing_has_nothing_to_compare(tmp_path):
    with Audit(tmp_path / "audit.db") as audit:
        _run(audit, "r1", SEED, SEED)
    out = tmp_path / "out.json"
    assert svf.main([str(tmp_path), "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == {"run_id": "r1", "same_kernel": True}


def test_per_shape_rows_are_medians_over_the_rounds_and_the_final_s_speedup():
    shapes = tuple(load_operator("rms_norm").select("hot"))[:2]
    a = ((4e-6, 5e-6, 6e-6, 100e-6), (10e-6, 10e-6, 11e-6, 12e-6))      # one outlier round: the median ignores it
    b = ((2e-6, 2.5e-6, 3e-6, 3e-6), (10e-6, 11e-6, 11e-6, 11e-6))
    series = ABSeries(tuple(s.id for s in shapes), a, b, rounds=4, floor_s=1.5e-6)
    rows = svf.per_shape(series, shapes, load_hardware("h200"), "rms_norm")
    assert [r["id"] for r in rows] == [s.id for s in shapes]
    assert rows[0]["seed_us"] == pytest.approx(5.5) and rows[0]["final_us"] == pytest.approx(2.75)
    assert rows[0]["speedup"] == pytest.approx(2.0) and rows[1]["speedup"] == pytest.approx(10.5 / 11)
    assert rows[0]["attain_final"] > rows[0]["attain_seed"] and rows[1]["attain_final"] < rows[1]["attain_seed"]
