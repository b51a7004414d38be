"""What a person watching `aka optimize` sees: a live panel on a terminal, one plain line per
iteration otherwise (logs, CI, pipes), and a per-shape summary table at the end.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sandbox.verdict import EvalResult


@dataclass(frozen=True)
class Status:
    run_id: str
    op: str
    iteration: int
    best: float | None
    last: str                 # what the last candidate changed ("" while an iteration is in flight)
    why: str                  # the lesson of the last iteration
    budget: str               # BudgetUsed.line(...)
    phase: str = ""           # what the loop is doing now: "proposing", "evaluating", ...


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


class Progress:
    def __init__(self, console=None, live: bool | None = None):
        from rich.console import Console
        if console is None:
            console = Console(stderr=True)
            if not console.is_terminal:      # logs and pipes: wide enough that a table row stays one line
                console = Console(stderr=True, width=140)
        self.console = console
        self.live_enabled = self.console.is_terminal if live is None else live
        self._live = None
        self._setup_phase: tuple[str, float] | None = None     # (phase, when printed) of iteration 0, plain mode

    def __enter__(self) -> "Progress":
        if self.live_enabled:
            from rich.live import Live
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def message(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def update(self, st: Status, final: bool = False) -> None:
        """`final`: the iteration is recorded (a plain line is printed only then)."""
        if self._live is not None:
            from rich.panel import Panel
            from rich.table import Table
            from rich.text import Text
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold")
            grid.add_column()
            rows = (("run", f"{st.run_id} ({st.op})"),
                    ("iteration", f"{st.iteration}" + (f"  ({st.phase})" if st.phase else "")),
                    ("best score", _fmt(st.best)),
                    ("last", st.why if not st.last else f"{st.last} -> {st.why}"),
                    ("budget", st.budget))
            for name, value in rows:   # Text, not markup: lessons quote code like x[:, None]
                grid.add_row(name, Text(value))
            self._live.update(Panel(grid, title="aka optimize"))
        elif final:
            what = f"{st.last} -> " if st.last else ""
            self.message(f"[{st.op} #{st.iteration}] best={_fmt(st.best)} | {what}{st.why} | {st.budget}")
        elif st.iteration == 0 and st.phase and (self._setup_phase is None or st.phase != self._setup_phase[0]):
            # Iteration 0 (the seed's full evaluation, then each baseline: torch.compile per shape took minutes
            # on an H100) has no iteration line until all of it is done: a log says each step as it starts.
            import time
            now = time.monotonic()
            after = f" ({now - self._setup_phase[1]:.0f} s after the last step began)" if self._setup_phase else ""
            self._setup_phase = (st.phase, now)
            self.message(f"[{st.op} #0] {st.phase}{after}")


def summary_rows(before: EvalResult | None, after: EvalResult | None) -> list[dict[str, Any]]:
    """Per visible shape: time before (seed) and after (final incumbent), T_roof, attainment before/after."""
    from agent.report import set_shares
    rows: dict[str, dict[str, Any]] = {}
    for tag, res in (("before", before), ("after", after)):
        if res is None:
            continue
        shares = set_shares(res.shapes)
        for s in res.visible_shapes():
            row = rows.setdefault(s.id, {"id": s.id, "dims": " ".join(f"{k}={v}" for k, v in s.dims.items()),
                                         "weight": shares.get(s.id), "t_roof_us": s.t_roof_us})
            row[f"t_{tag}_us"] = None if s.error else s.t_us
            row[f"a_{tag}"] = 0.0 if s.error else s.attainment
            row["t_roof_us"] = row["t_roof_us"] or s.t_roof_us
    return list(rows.values())


def summary_table(rows: list[dict[str, Any]], title: str):
    from rich.table import Table
    from rich.text import Text

    from agent.report import WEIGHT_NOTE
    table = Table(title=Text(f"{title}; {WEIGHT_NOTE}"))     # Text: "op [decode]" in a title is not markup
    for col in ("shape", "dims", "weight", "before (us)", "after (us)", "T_roof (us)", "attain before", "attain after"):
        table.add_column(col, justify="left" if col in ("shape", "dims") else "right")
    for r in rows:
        table.add_row(*(Text(c) for c in (r["id"], r["dims"], _fmt(r.get("weight")), _fmt(r.get("t_before_us"), ".3g"),
                                          _fmt(r.get("t_after_us"), ".3g"), _fmt(r.get("t_roof_us"), ".3g"),
                                          _fmt(r.get("a_before")), _fmt(r.get("a_after")))))
    return table


class StageProgress:
    """`aka bench`'s view of a sandbox evaluation: the sandbox calls it with (stage, activity) as each
    gate and shape starts. On a terminal a spinner names the stage and shape; piped, one line per
    stage on stderr (a minute of silence reads as a hang)."""

    def __init__(self, console=None):
        from rich.console import Console
        self.console = console or Console(stderr=True)
        self._status = None
        self._stage: str | None = None

    def __enter__(self) -> "StageProgress":
        if self.console.is_terminal:
            self._status = self.console.status("starting the sandbox")
            self._status.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)
            self._status = None

    def __call__(self, stage: str, activity: str) -> None:
        from rich.text import Text
        if self._status is not None:
            self._status.update(Text(f"{stage}: {activity}"))
        elif stage != self._stage:
            self.console.print(f"bench: {stage}: {activity}", markup=False, highlight=False)
        self._stage = stage
