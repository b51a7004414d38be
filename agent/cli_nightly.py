"""`aka nightly --config configs/nightly.yaml`: optimize a list of operators unattended, one run each.

Each operator runs as its own `aka optimize` process (python -m agent.cli_optimize), so a crash in one costs
that operator only; its output goes to $AKA_HOME/nightly/NIGHT/<op>.log, and the nightly prints one plain
line per event (`2026-12-01T02:00:00Z night=... op=rms_norm event=start run=...`), terminal or not.

One lock ($AKA_HOME/nightly.lock, flock: released by the kernel even when the process is killed) keeps two
nights from overlapping. After a crash, a kill or a reboot, the next start continues the unfinished night:
finished runs are kept, a run without its end record is continued with `aka optimize --resume RUN`
(a replay of its audit records), operators not yet started are started. A child dies with the nightly
(PR_SET_PDEATHSIG), so a restarted nightly never races an orphan.

At the end: summary.md and summary.json (S_i before/after per operator, S_agg before/after, what
improved, what regressed against the previous night) and the HTML report (report/index.html).

Exit codes (for a scheduler):
  0  every operator's run finished
  1  one or more operators' runs failed (see the summary and their logs); the others finished
  2  usage or configuration error
  3  another nightly holds the lock (try later; nothing was done)
  128+N  stopped by signal N (130 SIGINT, 143 SIGTERM) after the current run recorded its iteration;
         the next start continues the night
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional

import typer

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED = 0, 1, 2, 3
ROOT = Path(__file__).resolve().parent.parent


def log(night: str, **fields) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    parts = " ".join(f"{k}={json.dumps(v) if isinstance(v, str) and (' ' in v or not v) else v}"
                     for k, v in fields.items())
    print(f"{stamp} night={night} {parts}", flush=True)


def _usage(message: str) -> typer.Exit:
    from agent.cli import usage_error     # the one usage-error helper (exit 2)
    return usage_error(message)


def take_lock(home: Path):
    """The open lock file, or None when another nightly holds it."""
    home.mkdir(parents=True, exist_ok=True)
    f = open(home / "nightly.lock", "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the nightly dies (Linux PR_SET_PDEATHSIG = 1)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _head_seq(db: Path) -> int:
    from agent.audit import Audit
    with Audit(db) as audit:
        row = audit.db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()
    return int(row[0])


def find_run(db: Path, op: str, after_seq: int) -> tuple[str | None, dict | None]:
    """(run id, its last run_end body or None) of the first run of `op` started after audit seq `after_seq`."""
    from agent.audit import Audit
    if not db.is_file():
        return None, None
    with Audit(db) as audit:
        for r in audit.records(kind="run_start"):
            if r.seq > after_seq and r.body.get("op") == op:
                ends = audit.records(r.run_id, "run_end")
                return r.run_id, (ends[-1].body if ends else None)
    return None, None


class Night:
    def __init__(self, cfg, plan, state, child_args: list[str], weights=None):
        self.cfg, self.plan, self.state, self.child_args = cfg, plan, state, child_args
        self.weights = weights       # benchmarks.weights_file.WeightsFile of plan.weights, or None
        self.child: subprocess.Popen | None = None
        self.stop_signal: int | None = None

    def _on_signal(self, signum, frame):
        self.stop_signal = signum
        log(self.state.night, event="signal", signal=signal.Signals(signum).name,
            action="forwarded to the running optimize; stopping after it records its iteration")
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)

    def run(self) -> int:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self._on_signal)
        previous = None
        if self.plan.continue_from_previous:
            from agent.nightly import previous_summary
            previous = previous_summary(self.cfg.home_dir, self.state.night)
        for job in self.plan.jobs:
            if self.stop_signal is not None:
                break
            self.one(job, previous)
        if self.stop_signal is not None:
            self.state.save()
            log(self.state.night, event="stopped", exit=128 + self.stop_signal)
            return 128 + self.stop_signal
        return self.finish(previous)

    def one(self, job, previous) -> None:
        st, e, db = self.state, self.state.entry(job.op), self.cfg.audit_db
        if e["status"] in ("done", "failed"):
            log(st.night, op=job.op, event="skip", status=e["status"], run=e["run_id"], why="already in this night")
            return
        if e["run_id"] is None and e["audit_seq_before"] is not None:   # killed between its start and our note
            e["run_id"], _ = find_run(db, job.op, e["audit_seq_before"])
        if e["run_id"] is not None:
            end = self._end_of(e["run_id"])
            if end is not None and not str(end.get("reason", "")).startswith("stopped by"):
                e["status"] = "done"
                st.save()
                log(st.night, op=job.op, event="done", run=e["run_id"], why="its run had ended before the restart")
                return
            args, event = ["--resume", e["run_id"]], "resume"
        else:
            seed = None
            prev = {o["op"]: o for o in (previous or {}).get("operators", [])}.get(job.op)
            if prev and prev.get("kernel_path") and Path(prev["kernel_path"]).is_file() and "seed_kernel" not in job.options:
                seed = prev["kernel_path"]
            e["audit_seq_before"] = _head_seq(db) if db.is_file() else 0
            args, event = job.optimize_args(self.plan.base, seed), "start"
            if self.weights is not None:     # a resumed run keeps the weights it started with
                args += ["--weights", self.weights.path]
        e["status"] = "running"
        st.save()
        code = self._spawn(job.op, args, event)
        if e["run_id"] is None:
            e["run_id"], _ = find_run(db, job.op, e["audit_seq_before"])
        e["exit_code"] = code
        if code >= 128 or code < 0:
            e["status"] = "running"       # interrupted: resumed next time
        else:
            e["status"] = "done" if code == 0 else "failed"
        st.save()
        log(st.night, op=job.op, event="exit", code=code, run=e["run_id"], status=e["status"])

    def _end_of(self, run_id: str) -> dict | None:
        from agent.audit import Audit
        with Audit(self.cfg.audit_db) as audit:
            ends = audit.records(run_id, "run_end")
        return ends[-1].body if ends else None

    def _spawn(self, op: str, args: list[str], event: str) -> int:
        cmd = [sys.executable, "-m", "agent.cli_optimize", *args, *self.child_args]
        log(self.state.night, op=op, event=event, args=" ".join(args))
        with open(self.state.folder / f"{op}.log", "a") as out:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
            self.child = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env,
                                          preexec_fn=_die_with_parent)
            self.state.entry(op)["pid"] = self.child.pid
            self.state.save()
            while True:
                try:
                    code = self.child.wait()
                    break
                except InterruptedError:
                    continue
        self.child = None
        return code if code >= 0 else 128 - code

    def finish(self, previous) -> int:
        from agent.audit import Audit
        from agent.cli_report import build_report
        from agent.nightly import summarize, summary_markdown
        from agent.report_html.data import run_report
        st = self.state
        run_ids = [e["run_id"] for e in st.ops if e["run_id"]]
        reports = {}
        with Audit(self.cfg.audit_db) as audit:
            for e in st.ops:
                if e["run_id"]:
                    reports[e["op"]] = run_report(audit, e["run_id"])
            summary = summarize(st, reports, self.plan, previous, self.cfg.home_dir, self.weights)
            if run_ids:
                files, verify = build_report(audit, run_ids, st.folder / "report")   # the runs' own weights
                summary["audit"] = str(verify)
        from agent.audit import atomic_write
        atomic_write(st.folder / "summary.json", json.dumps(summary, indent=1, default=str))
        atomic_write(st.folder / "summary.md", summary_markdown(summary))
        st.finished = True
        st.save()
        log(st.night, event="summary", s_agg_before=summary["s_agg_before"], s_agg_after=summary["s_agg_after"],
            improved=",".join(summary["improved"]) or "none", regressed=",".join(summary["regressed"]) or "none",
            failed=",".join(summary["failed"]) or "none", path=str(st.folder / "summary.md"))
        return EXIT_FAILED if summary["failed"] else EXIT_OK


def nightly(config_file: Path = typer.Option(..., "--config", help="the nightly plan (configs/nightly.yaml)"),
            aka_config: Optional[Path] = typer.Option(None, "--aka-config", help="aka's own YAML config file"),
            override: List[str] = typer.Option([], "-c", help="config override key.path=value for every run"),
            weights: Optional[Path] = typer.Option(None, "--weights", help="weights file (aka weights --from-trace) "
                                                   "for every run and the summary's w_i; overrides the plan's")):
    """Optimize a list of operators unattended; resumable; a summary and a report at the end."""
    from agent.config import ConfigError, load_config
    from agent.nightly import NightlyConfigError, load_plan, open_night
    try:
        plan = load_plan(config_file)
    except NightlyConfigError as e:
        raise _usage(str(e))
    from agent.cli_weights import load_option
    # checked now, not after a night of runs; absolute: the runs start in the repository's folder
    weights_file = load_option(weights.resolve() if weights is not None else plan.weights)
    if weights_file is not None:
        from agent.nightly import check_weights
        from benchmarks.weights_trace import WeightsFileError
        try:
            check_weights(plan, weights_file)
        except (WeightsFileError, OSError, ValueError) as e:
            raise _usage(str(e))
    overrides = list(override) + list(plan.overrides)
    try:
        cfg = load_config(aka_config, overrides)
    except ConfigError as e:
        raise _usage(str(e))
    lock = take_lock(cfg.home_dir)
    if lock is None:
        holder = (cfg.home_dir / "nightly.lock").read_text().strip()
        typer.secho(f"error: another aka nightly (pid {holder or '?'}) holds {cfg.home_dir / 'nightly.lock'}; "
                    f"nothing done, try later", err=True, fg="red")
        raise typer.Exit(EXIT_LOCKED)
    try:
        state, resumed = open_night(cfg.home_dir, plan)
        log(state.night, event="resume" if resumed else "begin", session=state.sessions,
            operators=",".join(j.op for j in plan.jobs), folder=str(state.folder))
        child_args = (["--config", str(aka_config)] if aka_config else []) + [
            x for o in [f"home={cfg.home_dir}", *overrides] for x in ("-c", o)]
        code = Night(cfg, plan, state, child_args, weights_file).run()
    finally:
        lock.close()
    raise typer.Exit(code)


def main() -> None:
    typer.run(nightly)


if __name__ == "__main__":
    main()
