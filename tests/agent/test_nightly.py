"""`aka nightly`: a two-operator night on the CPU with the scripted proposer, SIGKILLed in the middle of its first
operator, restarted: every scripted candidate is evaluated exactly once, one run per operator, the trail verifies,
and the summary and report are written. A second nightly started meanwhile finds the lock and exits 3."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from agent.audit import Audit
from benchmarks.registry import load_operator

sys.path.insert(0, str(Path(__file__).parent))
pytestmark = pytest.mark.interpreter
ROOT = Path(__file__).resolve().parents[2]


def plan_file(tmp: Path) -> tuple[Path, dict[str, list[Path]]]:
    from test_cli_optimize import tiny_shapes
    from test_kill_resume import candidates, kernel_variant
    (tmp / "rms").mkdir()
    rms = candidates(tmp / "rms_c", 3)
    silu_src = Path(load_operator("silu_and_mul").seed_path).read_text()
    silu = []
    for i in range(1):
        p = tmp / f"silu_{i}.py"
        p.write_text(kernel_variant(silu_src, i))
        silu.append(p)
    (tmp / "silu_shapes.yaml").write_text(yaml.safe_dump({"shapes": [
        {"id": "tiny", "dims": {"T": 2, "I": 64}, "dtype": "fp32", "phase": "decode", "weight": 1.0}]}))
    cfg = {"operators": [
        {"op": "rms_norm", "shapes": str(tiny_shapes(tmp / "rms")), "proposer": "scripted",
         "script": [str(p) for p in rms], "iterations": 20},
        {"op": "silu_and_mul", "shapes": str(tmp / "silu_shapes.yaml"), "proposer": "scripted",
         "script": [str(p) for p in silu], "iterations": 20}],
        "overrides": ["knowledge.enabled=false", "sandbox.trials=1", "sandbox.holdout=false",
                      "acceptance.untimed=accept-correct"]}
    path = tmp / "nightly.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, {"rms_norm": rms, "silu_and_mul": silu}


def start(home: Path, plan: Path, tag: str) -> subprocess.Popen:
    env = dict(os.environ, TRITON_INTERPRET="1", AKA_HOME=str(home))
    out = open(home.parent / f"nightly-{tag}.log", "w")
    return subprocess.Popen([sys.executable, "-m", "agent.cli_nightly", "--config", str(plan), "-c", f"home={home}"],
                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def iterations(db: Path, op: str) -> int:
    from test_kill_resume import iterations_recorded
    if not db.exists():
        return 0
    import sqlite3
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM records r JOIN records s ON s.run_id = r.run_id AND "
                               "s.kind = 'run_start' WHERE r.kind = 'iteration' AND s.body->>'$.op' = ?",
                               (op,)).fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_sigkill_mid_night_then_restart_loses_nothing_and_repeats_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    plan, scripts = plan_file(tmp_path)
    db = home / "audit.db"
    first = start(home, plan, "1")
    t0 = time.monotonic()
    while iterations(db, "rms_norm") < 2:
        assert first.poll() is None, (tmp_path / "nightly-1.log").read_text()
        assert time.monotonic() - t0 < 300
        time.sleep(0.2)
    second = start(home, plan, "2")                                  # the lock is held: exit 3, nothing done
    assert second.wait(timeout=120) == 3, (tmp_path / "nightly-2.log").read_text()
    assert "holds" in (tmp_path / "nightly-2.log").read_text()
    night = next((home / "nightly").iterdir())
    child = json.loads((night / "state.json").read_text())["ops"][0]["pid"]
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=60) == -signal.SIGKILL
    for _ in range(100):                                             # the optimize child died with it
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"optimize child {child} outlived the SIGKILLed nightly")
    assert Audit(db).verify().ok

    third = start(home, plan, "3")
    assert third.wait(timeout=600) == 0, (tmp_path / "nightly-3.log").read_text()
    log = (tmp_path / "nightly-3.log").read_text()
    assert "event=resume" in log and "op=rms_norm event=resume" in log and "op=silu_and_mul event=start" in log
    audit = Audit(db)
    assert audit.verify().ok
    runs = {}
    for r in audit.records(kind="run_start"):
        runs.setdefault(r.body["op"], []).append(r.run_id)
    assert {op: len(v) for op, v in runs.items()} == {"rms_norm": 1, "silu_and_mul": 1}   # one run each
    for op, files in scripts.items():
        recs = [r.body["record"] for r in audit.records(runs[op][0], "iteration")]
        assert [r["iteration"] for r in recs] == list(range(len(recs)))
        assert [r["changed"] for r in recs if not r["is_seed"] and r["changed"] != "(no candidate)"] == \
            [f.name for f in files]                                 # each candidate once, in order
    state = json.loads((night / "state.json").read_text())
    assert state["finished"] and state["sessions"] == 2
    summary = json.loads((night / "summary.json").read_text())
    assert [o["op"] for o in summary["operators"]] == ["rms_norm", "silu_and_mul"]
    assert all(o["status"] == "done" and o["accepted"] >= 1 for o in summary["operators"])
    assert summary["s_agg_before"] is None and summary["failed"] == []   # interpreter: nothing scored
    assert "| rms_norm |" in (night / "summary.md").read_text()
    assert (night / "report" / "index.html").is_file() and (night / "report" / "silu_and_mul.html").is_file()


def test_config_errors_exit_2(tmp_path):
    from typer.testing import CliRunner
    from agent.cli import app
    bad = tmp_path / "n.yaml"
    for text, needle in (("operators: []", "non-empty list"), ("operators: [{op: nope}]", "unknown operator"),
                         ("operators: [{op: rms_norm, iterations: -1}]", "positive number"),
                         ("operators: [{op: rms_norm, budget: 3}]", "unknown key")):
        bad.write_text(text)
        r = CliRunner().invoke(app, ["nightly", "--config", str(bad), "-c", f"home={tmp_path}"])
        assert r.exit_code == 2 and needle in r.output, (text, r.output)


def test_a_from_reference_run_starts_from_its_first_passing_kernel_not_a_failed_try():
    from types import SimpleNamespace

    from agent.nightly import _first_score
    from agent.report_html.data import IterationPoint
    tries = (IterationPoint(0, None, "rejected", False, "lint", "first try", "", False),
             IterationPoint(1, 0.41, "accepted", True, None, "from the reference", "", False),
             IterationPoint(2, 0.47, "accepted", True, None, "BLOCK 64 -> 128", "", False))
    assert _first_score(SimpleNamespace(iterations=tries)) == 0.41
    seeded = (IterationPoint(0, 0.6, "accepted", True, None, "seed", "", True),) + tries[2:]
    assert _first_score(SimpleNamespace(iterations=seeded)) == 0.6
    assert _first_score(SimpleNamespace(iterations=tries[:1])) is None
