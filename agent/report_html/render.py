"""Write the static HTML report: index.html and one <op>.html per operator (one section per run).

Templates: agent/report_html/templates/*.html.jinja (autoescaped; only the charts' SVG goes in unescaped).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.report_html import charts
from agent.report_html.data import RunReport

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)


def _dims(d: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


def _final_score(run: RunReport) -> float | None:
    accepted = [p for p in run.iterations if p.accepted]
    return accepted[-1].score if accepted else None


@dataclass(frozen=True)
class RunView:
    """One run's section of an operator page: the run and what the template needs precomputed."""
    run: RunReport
    roofline: str
    attainment: str
    history: str
    seed_rows: dict
    final_rows: dict
    baseline_rows: dict
    holdout_total: int
    holdout_failed: int
    ab_pairs: list
    counters: list
    diff: list


def _diff_lines(run: RunReport) -> list[tuple[str, str]]:
    out = []
    for line in run.diff():
        cls = ("hunk" if line.startswith("@@") else "add" if line.startswith("+") and not line.startswith("+++")
               else "del" if line.startswith("-") and not line.startswith("---") else "ctx")
        out.append((cls, line))
    return out


def _counter_rows(run: RunReport) -> list[tuple[str, str]]:
    counters = (run.final.counters if run.final is not None else {}) or {}
    rows = []
    for key, value in counters.items():
        if isinstance(value, dict):
            rows += [(f"{key}.{k}", _fmt(v, ".4g")) for k, v in value.items()]
        elif isinstance(value, list):
            rows.append((key, "; ".join(str(v) for v in value)))
        else:
            rows.append((key, _fmt(value, ".4g")))
    return rows


def run_view(run: RunReport, n: int) -> RunView:
    rows = lambda res: {r.id: r for r in res.visible_shapes()} if res is not None else {}   # noqa: E731
    hidden = [r for r in run.final.shapes if r.holdout] if run.final is not None else []
    d = run.decision or {}
    inc, cand = list(d.get("incumbent") or []), list(d.get("candidate") or [])
    pairs = [(inc[i] if i < len(inc) else None, cand[i] if i < len(cand) else None)
             for i in range(max(len(inc), len(cand)))]
    salt = f"{run.run_id}-{n}"
    return RunView(run, charts.roofline_chart(run, f"{salt}-roof"), charts.attainment_chart(run, f"{salt}-att"),
                   charts.history_chart(run, f"{salt}-hist"), rows(run.seed), rows(run.final),
                   {b: rows(res) for b, res in run.baselines.items()}, len(hidden),
                   sum(1 for r in hidden if r.error), pairs, _counter_rows(run), _diff_lines(run))


def write_report(runs: list[RunReport], out: Path, verify, db: str) -> list[Path]:
    """Render the pages into `out`; returns the files written (index first)."""
    import jinja2
    from benchmarks.registry import load_operator
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    common = {"verify": verify, "db": db, "fmt": _fmt, "dims": _dims, "final_score": _final_score,
              "generated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(env.get_template("index.html.jinja").render(
        title="aka report", runs=runs, suite_svg=charts.suite_chart(runs, "suite") if runs else "",
        any_interpreter=any(r.interpreter for r in runs), **common))
    written = [index]
    for op in sorted({r.op for r in runs}):
        views = [run_view(r, i) for i, r in enumerate(x for x in runs if x.op == op)]
        page = out / f"{op}.html"
        page.write_text(env.get_template("operator.html.jinja").render(
            title=f"aka report: {op}", op=op, signature=load_operator(op).signature, views=views, **common))
        written.append(page)
    return written
