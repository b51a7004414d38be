"""Kill `aka optimize` (a real subprocess: python -m agent.cli_optimize) with SIGTERM and SIGKILL mid-run;
the audit trail must verify, every accepted kernel must be on disk, and --resume must continue the run."""
from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.audit import Audit

pytestmark = pytest.mark.interpreter

ROOT = Path(__file__).resolve().parents[2]


def kernel_variant(src: str, i: int) -> str:
    """src with a comment in the body of every @triton.jit function: other kernel code (its source is part of the
    call trace, sandbox/call_trace.py), so the loop does not reject it as the incumbent's work again (agent/no_op.py),
    as it does a copy with a comment at the end of the file."""
    lines, out, in_def = src.splitlines(), [], False
    for k, line in enumerate(lines):
        out.append(line)
        if line.startswith("def ") and k > 0 and lines[k - 1].startswith("@triton.jit"):
            in_def = True
        if in_def and line.rstrip().endswith(":"):
            out.append(f"    # variant {i}")
            in_def = False
    assert any(f"# variant {i}" in line for line in out), "no @triton.jit function found"
    return "\n".join(out) + "\n"


def candidates(folder: Path, n: int) -> list[Path]:
    """n correct candidates that differ from each other and from the seed (acceptance.untimed=accept-correct
    accepts a changed correct kernel under the interpreter), with a wrong one every third, so there are rejections too."""
    from test_loop import make_candidates, seed_source
    wrong = make_candidates(folder)["wrong.py"].read_text()
    src = seed_source()
    out = []
    for i in range(n):
        p = folder / f"cand_{i:02d}.py"
        p.write_text(kernel_variant(wrong if i % 3 == 2 else src, i))
        out.append(p)
    return out


def start(home: Path, args: list[str]) -> subprocess.Popen:
    from test_cli_optimize import tiny_shapes
    env = dict(os.environ, TRITON_INTERPRET="1", AKA_HOME=str(home))
    cmd = [sys.executable, "-m", "agent.cli_optimize", *args, "-c", f"home={home}", "-c", "knowledge.enabled=false",
           "-c", "sandbox.trials=1", "-c", "sandbox.holdout=false",
           "-c", "acceptance.untimed=accept-correct"]
    if "--resume" not in args:
        cmd[3:3] = ["--op", "rms_norm", "--shapes", str(tiny_shapes(home.parent)), "--proposer", "scripted"]
    log = open(home.parent / f"log-{time.monotonic_ns()}.txt", "w")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def iterations_recorded(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM records WHERE kind = 'iteration'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


def wait_for(db: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    t0 = time.monotonic()
    while iterations_recorded(db) < n:
        assert proc.poll() is None, f"aka optimize exited early with {proc.returncode}"
        assert time.monotonic() - t0 < timeout, f"fewer than {n} iterations recorded after {timeout} s"
        time.sleep(0.2)


def check_trail(db: Path) -> tuple[Audit, str]:
    audit = Audit(db)
    report = audit.verify()
    assert report.ok, report
    run_id = audit.run_ids()[-1]
    for r in audit.records(run_id, "accepted"):
        path = Path(r.body["path"])
        assert path.is_file(), f"accepted kernel of iteration {r.body['iteration']} is not on disk"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == r.body["source_sha256"]
    return audit, run_id


def logs(home: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(home.parent.glob("log-*.txt")))


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_kill_then_resume(tmp_path, how):
    home = tmp_path / "home"
    home.mkdir()
    files = candidates(tmp_path / "cands", 4)   # a wrong one (the third) and one after it
    script = [a for f in files for a in ("--script", str(f))]
    db = home / "audit.db"
    proc = start(home, [*script, "--iterations", "20"])
    wait_for(db, 3, proc)                       # the seed and two candidates recorded
    proc.send_signal(how)
    rc = proc.wait(timeout=300)
    assert rc == (143 if how == signal.SIGTERM else -signal.SIGKILL), logs(home)

    audit, run_id = check_trail(db)
    done = [r.body["record"] for r in audit.records(run_id, "iteration")]
    ends = audit.records(run_id, "run_end")
    if how == signal.SIGTERM:
        assert len(ends) == 1 and "SIGTERM" in ends[0].body["reason"]
    else:
        assert ends == []                        # no chance to say goodbye; nothing else is missing
    accepted_before = [r.body["iteration"] for r in audit.records(run_id, "accepted")]
    assert accepted_before[0] == 0 and len(accepted_before) >= 2
    audit.close()

    proc = start(home, ["--resume", run_id[:-2], *script])
    assert proc.wait(timeout=600) == 0, logs(home)
    audit, run_id2 = check_trail(db)
    assert run_id2 == run_id
    recs = [r.body["record"] for r in audit.records(run_id, "iteration")]
    its = [r["iteration"] for r in recs]
    assert its == list(range(len(recs))), its        # no gap, no iteration run twice
    # the scripted proposer went on with the next file, not from the start
    changed = [r["changed"] for r in recs if not r["is_seed"] and r["changed"].startswith("cand_")]
    assert changed == [f.name for f in files]
    assert [r["accepted"] for r in recs[1:1 + len(files)]] == [i % 3 != 2 for i in range(len(files))]
    assert "nothing more to propose" in audit.records(run_id, "run_end")[-1].body["reason"]
    assert [r.body["session"] for r in audit.records(run_id, "resume")] == [2]
    assert f"resuming {run_id}" in logs(home)
    assert (home / "runs" / run_id / "best.py").read_text() == files[-1].read_text()
