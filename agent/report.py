"""Render evaluation results for people: per-shape tables and scores under both ceilings."""
from __future__ import annotations

from dataclasses import dataclass

from benchmarks.hardware import Hardware
from benchmarks.roofline import roofline
from benchmarks.registry import load_operator
from benchmarks.scoring import EmptyShapeSet, operator_score, score_shape
from sandbox.verdict import EvalResult

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

    table = Table(title=title)
    for col in ("shape", "dims", "weight", "t (us)", "eager (us)", "T_roof (us)", "attain", "bound", "rel_l2", "status"):
        table.add_column(col, justify="right" if col not in ("shape", "dims", "bound", "status") else "left")
    for r in result.shapes:
        dims = " ".join(f"{k}={v}" for k, v in r.dims.items())
        status = "ok" if r.error is None else r.error[:60]
        if r.holdout:   # hidden shapes: their dims are never printed (logs end up in prompts)
            table.add_row("(hold-out)", "(hidden)", "-", "-", "-", "-", "-", "-", _fmt(r.rel_l2, ".1e"), status)
            continue
        table.add_row(r.id, dims, _fmt(r.weight, ".3f"), _fmt(r.t_us), _fmt(r.t_eager_us), _fmt(r.t_roof_us),
                      _fmt(r.attainment), r.bound or "-", _fmt(r.rel_l2, ".1e"),
                      status + (" SUSPECT" if r.suspect else ""))
    return table
