"""Render evaluation results for people: per-shape tables and scores under both ceilings."""
from __future__ import annotations

from dataclasses import dataclass

from benchmarks.hardware import Hardware
from benchmarks.roofline import roofline
from benchmarks.registry import load_operator
from benchmarks.scoring import EmptyShapeSet, operator_score, score_shape
from sandbox.verdict import EvalResult, ShapeResult

NOT_RUN_STAGES = ("lint", "compile")   # a candidate rejected here never ran on any shape
WEIGHT_NOTE = "weight = share of the shown set"


def set_shares(rows: list[ShapeResult]) -> dict[str, float]:
    """The one weight every display shows: each visible shape's share of the set's weight (what
    `aka shapes` and the system prompt show for the same set), whatever scale the records carry."""
    total = sum(max(0.0, r.weight or 0.0) for r in rows if not r.holdout)
    return {r.id: (max(0.0, r.weight or 0.0) / total if total > 0 else 0.0) for r in rows if not r.holdout}


def shape_status(result: EvalResult, row: ShapeResult) -> str:
    """`not run` for a candidate stopped before any shape ran; else ok or the shape's error."""
    if row.error is not None:
        return row.error
    if not result.accepted and result.failed_stage in NOT_RUN_STAGES:
        return f"not run (rejected at {result.failed_stage})"
    return "ok"


def ran_note(row: ShapeResult) -> str:
    """Where the interpreter ran scaled-down dims: say which (T_roof is the hot shape's)."""
    if not row.ran_dims or dict(row.ran_dims) == dict(row.dims):
        return ""
    return "ran at " + " ".join(f"{k}={v}" for k, v in row.ran_dims.items())

INTERPRETER_NOTE = ("no GPU: kernels run under Triton's interpreter on scaled-down shapes; "
                    "correctness is real, the timings mean nothing and are not scores")


@dataclass(frozen=True)
class Rescored:
    ceilings: str
    attainment: dict[str, float]
    s_i: float | None


def rescore(result: EvalResult, hw: Hardware, t_floor_us: float | None = None) -> Rescored:
    """Score the measured times of `result` against another set of ceilings."""
    spec = load_operator(result.op)
    by_id = {s.id: s for s in spec.shapes}
    scores = []
    for row in result.visible_shapes():
        shape = by_id.get(row.id)
        if shape is None or row.t_us is None and row.error is None:
            continue
        W, Q = spec.work(shape)
        floor = (t_floor_us if t_floor_us is not None else (row.t_floor_us or 0.0)) * 1e-6
        t = None if row.error else row.t_us * 1e-6
        scores.append(score_shape(row.id, row.weight, t, roofline(W, Q, hw).t_roof_s, floor))
    try:
        s_i = operator_score(scores)
    except EmptyShapeSet:
        s_i = None
    return Rescored(f"{hw.name} {hw.source}", {s.id: s.attainment for s in scores}, s_i)


def console():
    """A rich console that stays wide enough for the tables when output goes to a file or a pipe."""
    import shutil

    from rich.console import Console
    c = Console()
    return c if c.is_terminal else Console(width=max(shutil.get_terminal_size((160, 24)).columns, 160))


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def shape_table(result: EvalResult, title: str):
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"{title}; {WEIGHT_NOTE}"))      # Text: a title like "op [decode]" is not markup
    for col in ("shape", "dims", "weight", "t (us)", "eager (us)", "T_roof (us)", "attain", "bound", "rel_l2", "status"):
        table.add_column(col, justify="right" if col not in ("shape", "dims", "bound", "status") else "left")
    shares = set_shares(result.shapes)
    for r in result.shapes:
        dims = " ".join(f"{k}={v}" for k, v in r.dims.items())
        status = shape_status(result, r)[:60]
        if r.holdout:   # hidden shapes: their dims are never printed (logs end up in prompts)
            table.add_row(*(Text(c) for c in ("(hold-out)", "(hidden)", "-", "-", "-", "-", "-", "-",
                                              _fmt(r.rel_l2, ".1e"), status)))
            continue
        notes = [n for n in (ran_note(r), "SUSPECT" if r.suspect else "") if n]
        cells = (r.id, dims, _fmt(shares.get(r.id), ".3f"), _fmt(r.t_us), _fmt(r.t_eager_us), _fmt(r.t_roof_us),
                 _fmt(r.attainment), r.bound or "-", _fmt(r.rel_l2, ".1e"), " ".join([status] + notes))
        table.add_row(*(Text(c) for c in cells))
    return table
