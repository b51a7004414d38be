"""`aka audit`: review runs from the audit trail.

    aka audit list                        runs: operator, proposer, iterations, accepted, best score, end
    aka audit show RUN                    one run: plan, every iteration with its verdict and lesson, dropouts,
                                          how many moves the search dropped before the GPU
    aka audit diff RUN [ITER]             unified diff: candidate of ITER vs its incumbent (default: seed vs final)
    aka audit verify [--strict]           walk the hash chain; exit 1 naming the first bad record
    aka audit export RUN --to DIR         upstream-ready bundle (agent/audit_export.py)

RUN is a run id, a unique prefix of one, or `last`. Exit codes: 0 ok, 1 verification failed, 2 usage.
"""
from __future__ import annotations

import difflib
import hashlib
from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="review runs: list, show, diff, verify, export")

_DB = typer.Option(None, "--db", help="audit database (default: the config's, $AKA_HOME/audit.db)")
_CONFIG = typer.Option(None, "--config", help="YAML config file")
_OVERRIDE = typer.Option([], "-c", help="config override key.path=value")


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg="red")
    return typer.Exit(code)


def _open(db: Optional[Path], config: Optional[Path], override: List[str]):
    from agent.audit import Audit
    from agent.config import ConfigError, load_config
    if db is None:
        try:
            db = load_config(config, override).audit_db
        except ConfigError as e:
            raise _fail(str(e))
    if not Path(db).is_file():
        raise _fail(f"no audit database at {db}; `aka optimize` creates it (or pass --db PATH)")
    return Audit(db)


def _view(audit, run: str):
    from agent.audit import AuditError
    from agent.audit_export import ExportError, load_run
    try:
        return load_run(audit, audit.resolve_run(run))
    except (AuditError, ExportError) as e:
        raise _fail(str(e))


def _console():
    """A terminal's own width; 160 columns when piped, so run ids and lessons stay on one line for grep."""
    from rich.console import Console
    c = Console()
    return c if c.is_terminal else Console(width=160)


def _fmt(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


@app.command("list")
def list_runs(db: Optional[Path] = _DB, config: Optional[Path] = _CONFIG, override: List[str] = _OVERRIDE):
    """List the recorded runs, oldest first."""
    from rich.table import Table
    from rich.text import Text

    from agent import records as R
    from agent.audit_export import load_run
    with _open(db, config, override) as audit:
        table = Table(title=Text(f"runs in {audit.path}"))
        for col in ("run", "op", "set", "proposer", "started", "iterations", "accepted", "best", "end"):
            table.add_column(col, no_wrap=col == "run")
        for run_id in audit.run_ids():
            v = load_run(audit, run_id)
            recs = [r.record for r in v.of(R.Iteration)]
            scores = [a.score for a in v.accepted() if a.score is not None]
            who = v.start.proposer + (f" ({v.start.model})" if v.start.model else "")
            end = v.end.reason if v.end else "(running or killed)"
            cells = (run_id, v.start.op, v.start.shape_set, who, v.started_at[:19],
                     str(sum(1 for r in recs if not r.is_seed)),
                     str(sum(1 for r in recs if r.accepted and not r.is_seed)),
                     _fmt(max(scores) if scores else None), end)
            table.add_row(*(Text(c) for c in cells))
        _console().print(table)


@app.command()
def show(run: str = typer.Argument(..., help="run id, unique prefix, or `last`"),
         db: Optional[Path] = _DB, config: Optional[Path] = _CONFIG, override: List[str] = _OVERRIDE):
    """One run: its plan, every iteration (verdict, score, what changed, lesson), dropouts, the search's drops before
    the GPU, usage, end."""
    from rich.table import Table
    from rich.text import Text

    from agent import records as R
    from agent.types import format_usd
    console = _console()
    with _open(db, config, override) as audit:
        v = _view(audit, run)
        s = v.start
        hw = s.hardware if isinstance(s.hardware, dict) else {"name": s.hardware}
        console.print(f"{v.run_id}: {s.op} [{s.shape_set}] shapes "
                      f"{', '.join(x['id'] for x in s.shapes)}; proposer {s.proposer}"
                      + (f" ({s.model})" if s.model else "")
                      + ("; no seed: the first kernel was written from the reference" if s.from_reference else "")
                      + f"; hardware {hw.get('name', '?')} ({hw.get('source', '?')}); target {s.target}; "
                      f"limits {s.limits.to_json()}", highlight=False, markup=False)
        table = Table()
        for col in ("#", "verdict", "stage", "score", "accepted", "changed", "lesson"):
            table.add_column(col, overflow="fold")
        iterations = v.of(R.Iteration)
        for it in iterations:
            rec = it.record
            cells = (str(rec.iteration), rec.verdict, rec.failed_stage or "", _fmt(rec.score),
                     "yes" if rec.accepted else "", rec.changed, rec.lesson)
            table.add_row(*(Text(c) for c in cells))      # not markup: lessons quote code like x[rows]
        console.print(table)
        for d in v.of(R.Dropout):
            console.print(f"dropout before iteration {d.iteration}: masked {list(d.masked)} "
                          f"(p={d.p}, rng seed {d.rng_seed}, protected {list(d.protected)})", markup=False)
        drops = {it.iteration: len(it.proposal.dropped) for it in iterations if it.proposal and it.proposal.dropped}
        if drops:
            console.print(f"{sum(drops.values())} search moves dropped before the GPU by the compile check, with "
                          f"their reasons in the proposal meta (`dropped`) of iterations "
                          f"{', '.join(f'#{i}' for i in drops)}", highlight=False, markup=False)
        usages = [it.usage for it in iterations if it.usage is not None]
        tokens = sum(u.tokens for u in usages)
        usd = sum(u.usd for u in usages)
        evaluations = v.of(R.Evaluation)
        gpu = sum(e.gpu_s for e in evaluations)
        console.print(f"usage: {tokens} tokens, {format_usd(usd)}, {gpu / 60:.2f} GPU minutes, "
                      f"{len(evaluations)} evaluations, {len(v.of(R.Resume))} resumes", highlight=False, markup=False)
        if v.accepted():
            final = v.final()
            console.print(f"final kernel: iteration {final.iteration}, sha256 {final.source_sha256[:12]}, "
                          f"score {_fmt(final.score)}, {final.path}", highlight=False, markup=False)
        console.print(f"end: {v.end.reason if v.end else '(running, or killed before it ended)'}", markup=False)


@app.command()
def diff(run: str = typer.Argument(..., help="run id, unique prefix, or `last`"),
         iteration: Optional[int] = typer.Argument(None, help="candidate of this iteration vs the incumbent it faced "
                                                   "(default: seed vs final accepted)"),
         db: Optional[Path] = _DB, config: Optional[Path] = _CONFIG, override: List[str] = _OVERRIDE):
    """Unified diff between two kernels of a run."""
    from agent.audit_export import ExportError
    with _open(db, config, override) as audit:
        v = _view(audit, run)
        try:
            if iteration is None:
                old = v.accepted()[0]
                new = v.final()
                a_sha, b_sha = old.source_sha256, new.source_sha256
                a_name, b_name = "seed", f"final (iteration {new.iteration})"
            else:
                it = v.iteration(iteration)
                if not it.source_sha256:
                    raise _fail(f"iteration {iteration} produced no candidate: {it.record.lesson}")
                inc = v.incumbent_before(iteration) if iteration > 0 else v.accepted()[0]
                a_sha, b_sha = inc.source_sha256, it.source_sha256
                a_name, b_name = f"incumbent (iteration {inc.iteration})", f"candidate (iteration {iteration})"
        except (ExportError, IndexError) as e:
            raise _fail(str(e) or f"run {v.run_id} has no accepted kernel")
        a, b = audit.source(a_sha), audit.source(b_sha)
    text = "".join(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                        fromfile=f"{a_name} {a_sha[:12]}", tofile=f"{b_name} {b_sha[:12]}"))
    typer.echo(text if text else f"no difference: both are {a_sha[:12]}")


@app.command()
def verify(db: Optional[Path] = _DB, config: Optional[Path] = _CONFIG, override: List[str] = _OVERRIDE,
           strict: bool = typer.Option(False, "--strict", help="also fail (exit 1) when the chain's tail cannot "
                                       "be checked (no head file)")):
    """Check the whole trail: hash chain, iteration numbering, sources, and the accepted kernel files on disk.

    Problems print before anything that reads as ok; a warning that limits what was checked is the last line."""
    from agent import records as R
    with _open(db, config, override) as audit:
        report = audit.verify()
        problems, missing = [], 0
        for r in audit.records(kind="accepted"):
            acc = R.Accepted.from_json(r.body)
            path = Path(acc.path)
            if not path.is_file():
                missing += 1
                continue
            if hashlib.sha256(path.read_bytes()).hexdigest() != acc.source_sha256:
                problems.append(f"{path} differs from the accepted kernel recorded in record #{r.seq}")
        head_path = audit.head_path
    for p in problems:
        typer.secho(f"TAMPERED: {p}", fg="red")
    if not report.ok:
        typer.secho(str(report), fg="red")
    elif not problems:
        typer.echo(str(report))
    else:
        typer.echo(f"the hash chain itself is intact ({report.records} records, {report.blobs} sources)")
    if missing:
        typer.echo(f"note: {missing} accepted kernel file(s) are not on this disk (moved or another machine); "
                   f"their sources are in the database")
    if report.ok and not report.tail_checked:
        typer.secho(report.tail_warning(head_path), fg="yellow")
    if problems or not report.ok or (strict and not report.tail_checked):
        raise typer.Exit(1)


@app.command()
def export(run: str = typer.Argument(..., help="run id, unique prefix, or `last`"),
           to: Path = typer.Option(..., "--to", help="folder to write the bundle into"),
           db: Optional[Path] = _DB, config: Optional[Path] = _CONFIG, override: List[str] = _OVERRIDE):
    """Write an upstream-ready bundle: kernel, standalone test, performance table, tuned configs."""
    from agent.audit_export import ExportError, export_run
    if to.exists() and not to.is_dir():
        raise _fail(f"--to {to} is an existing file; the bundle is a folder of several files: give a new or "
                    f"existing folder, e.g. --to {to.with_suffix('')}-bundle")
    with _open(db, config, override) as audit:
        v = _view(audit, run)
        try:
            files = export_run(audit, v.run_id, to)
        except ExportError as e:
            raise _fail(str(e))
    for f in files:
        typer.echo(f"wrote {f}")
