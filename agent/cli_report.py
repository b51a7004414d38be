"""`aka report`: a static HTML report of runs, for people who review results.

    aka report last --out report/                 # the latest run
    aka report rms_norm-2026 fused_moe-2026 --out report/
    aka report --since 2026-12-01 --out report/   # every run started that day or later
    aka report --out report/                      # every run in the audit trail
    aka report last --weights traced.json --out report/   # shapes and scores weighed by your own traces

Writes index.html and one <op>.html per operator (agent/report_html/). Exit codes: 0 written,
1 the audit trail failed verification (the report is still written and says so on every page), 2 usage error.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional

import typer


def _usage(message: str) -> typer.Exit:
    from agent.cli import usage_error     # the one usage-error helper (exit 2)
    return usage_error(message)


def parse_since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise _usage(f"--since {text!r} is not a date; write 2026-12-01 or 2026-12-01T18:00 (UTC)")
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def build_report(audit, run_ids: list[str], out: Path, weights=None) -> tuple[list[Path], object]:
    """Read the runs and write the pages; (files, verification report). Used by `aka nightly` too.
    `weights`: a benchmarks.weights_file.WeightsFile that re-weighs every run's shapes and scores."""
    from agent.report_html.data import run_report
    from agent.report_html.render import write_report
    verify = audit.verify()
    runs = [run_report(audit, r, weights) for r in run_ids]
    return write_report(runs, out, verify, str(audit.path)), verify


def report(runs: List[str] = typer.Argument(None, help="run ids, unique prefixes, or `last` (default: all runs)"),
           since: Optional[str] = typer.Option(None, "--since", help="runs started on or after this date (UTC)"),
           out: Path = typer.Option(..., "--out", help="folder for index.html and the operator pages"),
           db: Optional[Path] = typer.Option(None, "--db", help="audit database (default: $AKA_HOME/audit.db)"),
           weights: Optional[Path] = typer.Option(None, "--weights", help="weights file (aka weights --from-trace): "
                                                  "re-weigh the shapes and the scores shown"),
           config: Optional[Path] = typer.Option(None, "--config", help="YAML config file"),
           override: List[str] = typer.Option([], "-c", help="config override key.path=value")):
    """Write a static HTML report of runs: rooflines, before/after, score history, diffs, evidence."""
    from agent.audit import AuditError
    from agent.cli_audit import _open
    from agent.cli_weights import load_option
    from agent.report_html.data import select_runs
    from benchmarks.weights_trace import WeightsFileError
    when = parse_since(since)
    weights_file = load_option(weights)
    with _open(db, config, override) as audit:
        try:
            ids = select_runs(audit, list(runs or []), when)
        except AuditError as e:
            raise _usage(str(e))
        if not ids:
            raise _usage(f"no runs selected in {audit.path}" + (f" since {since}" if since else "")
                         + "; `aka audit list` shows the runs")
        try:
            files, verify = build_report(audit, ids, out, weights_file)
        except (AuditError, WeightsFileError) as e:
            raise _usage(str(e))
    typer.echo(f"wrote {files[0]} and {len(files) - 1} operator page(s) for {len(ids)} run(s)")
    if not verify.ok:
        typer.secho(f"audit trail: {verify}", err=True, fg="red")
        raise typer.Exit(1)
