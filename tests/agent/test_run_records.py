"""Typed run records, the fold that is the run state, resume as a replay (search included), the per-run
lock, and `aka audit verify`'s numbering, tail and kernel-file checks.

Fast: the loop runs with a real SQLite trail and a real proposer, but a stand-in evaluator (the seed
passes, every candidate fails correctness) instead of the sandbox; the lock tests use real processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent import records as R
from agent.audit import Audit
from agent.budget import BudgetLimits
from agent.cli_optimize import contract_for
from agent.config import load_config
from agent.loop import Loop, RunPlan
from agent.progress import Progress
from agent.proposers.search import SearchProposer
from agent.run_lock import RunLocked, acquire, lock_path, run_lock
from agent.state import fold
from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.spec import Shape
from sandbox.verdict import EvalResult, ShapeResult

ROOT = Path(__file__).resolve().parents[2]
OP = "rms_norm"
SHAPES = (Shape.make("tiny-a", {"T": 3, "H": 64}, dtype="fp32", weight=2.0),)
SEED = Path(load_operator(OP).seed_path).read_text()


def stand_in(req) -> EvalResult:
    """The seed passes; every other candidate fails correctness (what a search under the interpreter meets)."""
    row = ShapeResult("tiny-a", {"T": 3, "H": 64}, "fp32", 1.0, timing_mode="interpreter")
    if req.source == SEED:
        return EvalResult(op=OP, verdict="accepted", shapes=[row], interpreter=True)
    bad = ShapeResult("tiny-a", {"T": 3, "H": 64}, "fp32", 1.0, error="max_rel_err 0.5 > 1e-5")
    return EvalResult(op=OP, verdict="rejected", failed_stage="correctness", reasons=["wrong"], shapes=[bad],
                      interpreter=True)


def make_loop(home: Path, proposer, iterations: int, run_id: str = "run-1"):
    cfg = load_config(None, [f"home={home}", "knowledge.enabled=false", "acceptance.repeats=1"])
    audit = Audit(cfg.audit_db)
    plan = RunPlan(op=OP, shape_set="test", shapes=SHAPES, hardware=load_hardware("h200"), seed_source=SEED,
                   seed_path="seed.py", limits=BudgetLimits(iterations=iterations), rng_seed=3)
    loop = Loop(plan, cfg, proposer, audit, contract_for(load_operator(OP), SHAPES), run_id, evaluate=stand_in,
                progress=Progress(live=False))
    return loop, audit


def candidate_shas(audit, run_id="run-1") -> list[str]:
    return [r.record.candidate_hash for r in R.typed(audit, run_id) if isinstance(r, R.Iteration)
            and not r.record.is_seed]


# ---- typed records ---------------------------------------------------------------------------------
def test_every_record_kind_round_trips_through_json(tmp_path):
    loop, audit = make_loop(tmp_path / "home", SearchProposer(seed=3), iterations=3)
    loop.run()
    recs = R.typed(audit, "run-1")
    kinds = {type(r) for r in recs}
    assert {R.RunStart, R.Evaluation, R.Iteration, R.Accepted, R.RunEnd} <= kinds
    for raw, rec in zip((x for x in audit.records("run-1") if x.kind in R.TYPES), recs):
        assert rec.kind == raw.kind
        assert json.loads(json.dumps(rec.to_json())) == raw.body        # what was stored is what the type writes
        assert type(rec).from_json(rec.to_json()) == rec
    end = R.of(recs, R.RunEnd)[-1]
    assert end.exit_code == 0 and end.reason.startswith("iterations budget reached")


def test_the_fold_of_the_stored_records_is_the_live_state(tmp_path):
    loop, audit = make_loop(tmp_path / "home", SearchProposer(seed=3), iterations=6)
    loop.run()
    live, replayed = loop.st, fold(audit.records("run-1"), audit.source)
    assert replayed.iteration == live.iteration == 7
    assert replayed.incumbent_sha == live.incumbent_sha and replayed.incumbent_source == SEED
    assert replayed.stall == live.stall and replayed.used.iterations == live.used.iterations == 6
    assert replayed.memory.visible() == live.memory.visible()
    assert replayed.memory.masked_iterations == live.memory.masked_iterations   # the dropout after 4 stalls too
    assert set(replayed.seen) == set(live.seen)


# ---- resume is a replay: the search proposer never repeats an evaluated candidate ------------------
def test_a_resumed_search_continues_where_it_stopped(tmp_path):
    whole, audit = make_loop(tmp_path / "a", SearchProposer(seed=3), iterations=5)
    whole.run()
    uninterrupted = candidate_shas(audit)
    first, audit1 = make_loop(tmp_path / "b", SearchProposer(seed=3), iterations=2)
    first.run()
    audit1.close()
    second, audit2 = make_loop(tmp_path / "b", SearchProposer(seed=3), iterations=5)   # a fresh process's proposer
    second.run(resume=True)
    resumed = candidate_shas(audit2)
    stages = [r.record.failed_stage for r in R.typed(audit2, "run-1") if isinstance(r, R.Iteration)]
    assert "duplicate" not in stages
    assert len(set(resumed)) == len(resumed) == 5
    assert resumed == uninterrupted            # the same search as if it had never stopped
    assert second.replayed == 2                # it heard the two recorded outcomes once each


# ---- one run, one writer ---------------------------------------------------------------------------
HOLDER = """
import sys, time
from agent.run_lock import acquire
lock = acquire(sys.argv[1], sys.argv[2])
print("held", flush=True)
time.sleep(60)
"""


def hold_in_child(db: Path, run_id: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), run_id], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_writer_is_refused_naming_the_holder_and_a_kill_9_lock_is_taken_over(tmp_path):
    db = tmp_path / "audit.db"
    child = hold_in_child(db, "run-x")
    try:
        with pytest.raises(RunLocked) as e:
            acquire(db, "run-x")
        assert f"pid {child.pid} on host {socket.gethostname()}" in str(e.value)
        with run_lock(db, "run-y"):      # another run of the same database is not blocked
            pass
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    lock = acquire(db, "run-x")          # the kernel released the dead holder's flock
    try:
        assert lock.stale is not None and lock.stale["pid"] == child.pid
    finally:
        lock.release()
    with run_lock(db, "run-x") as again:  # a clean release leaves no stale holder behind
        assert again.stale is None
    assert lock_path(db, "run-x").parent == tmp_path / "locks"


def test_optimize_resume_refuses_a_run_another_process_writes(tmp_path):
    home = tmp_path / "home"
    loop, audit = make_loop(home, SearchProposer(seed=3), iterations=1)
    loop.run()
    audit.close()
    child = hold_in_child(home / "audit.db", "run-1")
    try:
        from agent.cli import app
        out = CliRunner().invoke(app, ["optimize", "--resume", "run-1", "--iterations", "3", "-c", f"home={home}",
                                       "-c", "knowledge.enabled=false"])
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert out.exit_code == 2, out.output
    assert f"being written by pid {child.pid}" in out.output
    assert len(R.of(R.typed(Audit(home / "audit.db"), "run-1"), R.Iteration)) == 2   # nothing was appended


# ---- aka audit verify --------------------------------------------------------------------------------
def verify(home: Path, *extra: str):
    from agent.cli import app
    return CliRunner().invoke(app, ["audit", "verify", "-c", f"home={home}", *extra])


def test_verify_catches_a_repeated_iteration_number(tmp_path):
    home = tmp_path / "home"
    loop, audit = make_loop(home, SearchProposer(seed=3), iterations=2)
    loop.run()
    last = R.of(R.typed(audit, "run-1"), R.Iteration)[-1]
    R.append(audit, "run-1", last)        # a second writer recording the same iteration again
    out = verify(home)
    assert out.exit_code == 1 and "is iteration 2, expected 3" in out.output and "repeats" in out.output


def test_verify_warns_last_when_the_tail_cannot_be_checked_and_strict_fails(tmp_path):
    home = tmp_path / "home"
    loop, audit = make_loop(home, SearchProposer(seed=3), iterations=1)
    loop.run()
    audit.close()
    assert verify(home).exit_code == 0
    (home / "audit.db.head").unlink()
    out = verify(home)
    lines = out.output.strip().splitlines()
    assert out.exit_code == 0 and lines[-1].startswith("warning: no head file")
    assert verify(home, "--strict").exit_code == 1


def test_a_tampered_kernel_file_is_reported_before_anything_that_reads_as_ok(tmp_path):
    home = tmp_path / "home"
    loop, audit = make_loop(home, SearchProposer(seed=3), iterations=1)
    loop.run()
    path = Path(R.of(R.typed(audit, "run-1"), R.Accepted)[0].path)
    audit.close()
    path.write_text(path.read_text() + "\n# edited\n")
    out = verify(home)
    lines = out.output.strip().splitlines()
    assert out.exit_code == 1 and lines[0].startswith("TAMPERED:") and str(path) in lines[0]
    assert not any(line.startswith("ok") for line in lines)
