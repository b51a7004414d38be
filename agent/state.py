"""The run state, and the one function that folds typed records into it.

The loop applies every record it writes with `step` (so its live state is by construction what the
records say), and `--resume` rebuilds the state with `fold` over the stored records: resume is a
replay, not a second reading of the trail. `fold` is also what `aka report`/`nightly` may use to
read a run's standing without the loop.

What a kill costs: evaluations of an iteration cut short count towards the GPU budget (the GPU time
was spent) but the iteration itself is run again under the same number.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from agent.budget import BudgetUsed
from agent.memory import Memory
from agent.records import Accepted, Dropout, Evaluation, Iteration, Resume, RunEnd, RunRecord, RunStart, parse
from agent.run_floor import RunFloor, pin_floor, trusted
from agent.types import IterationRecord
from sandbox.verdict import EvalResult

SourceOf = Callable[[str], str]      # sha256 -> source text (Audit.source)


@dataclass
class RunState:
    """Everything the loop carries between iterations."""

    memory: Memory = field(default_factory=Memory)
    op: str = ""
    start: RunStart | None = None
    incumbent_source: str = ""
    incumbent_sha: str = ""
    incumbent_result: EvalResult | None = None
    incumbent_score: float | None = None
    seed_result: EvalResult | None = None   # the summary's "before": the seed, or in a --from-reference run
                                            # the first kernel written from the reference that passed every gate
    last_result: EvalResult | None = None
    best: float | None = None
    iteration: int = 0                 # the next iteration's number (0: the seed is still to be evaluated)
    stall: int = 0                     # iterations since the last acceptance or dropout
    used: BudgetUsed = BudgetUsed()
    seen: dict = field(default_factory=dict)       # sha256 -> IterationRecord of its first iteration
    results: dict = field(default_factory=dict)    # sha256 -> EvalResult of its full evaluation
    history: list = field(default_factory=list)    # every Iteration record, in order (for proposers)
    session: int = 1                   # 1 for the first process of a run, +1 per --resume
    interpreter: bool = False
    run_floor: RunFloor = field(default_factory=RunFloor)   # the T_floor every compared score uses
                                                            # (agent/run_floor.py)
    ended: RunEnd | None = None
    clock: float = field(default_factory=time.monotonic)

    @property
    def run_floor_us(self) -> float | None:
        return self.run_floor.floor_us


def step(st: RunState, rec: RunRecord, source: SourceOf | None = None) -> RunState:
    """Apply one record to the state (in place; returns it). `source` resolves an accepted kernel's
    text (the incumbent's source is not in the record, only its sha256)."""
    if isinstance(rec, RunStart):
        st.start, st.op = rec, rec.op
    elif isinstance(rec, Resume):
        st.session, st.ended = rec.session, None
        _snapshot(st, rec.used)
    elif isinstance(rec, Evaluation):
        st.used = st.used.plus(gpu_s=rec.gpu_s)
        if trusted(rec.role) and st.run_floor.offer(rec.role, rec.iteration, rec.eval_result()):
            for result in st.results.values():     # stored before (or on) the floor it had: rescored on this one
                pin_floor(result, st.run_floor_us)
        if rec.full:
            result = pin_floor(rec.eval_result(), st.run_floor_us)
            if rec.source_sha256:
                st.results[rec.source_sha256] = result
            if rec.role == "seed":
                st.seed_result, st.interpreter = result, result.interpreter
            elif rec.role == "candidate" and st.seed_result is None:   # --from-reference: no seed says it
                st.interpreter = result.interpreter
    elif isinstance(rec, Accepted):
        st.incumbent_sha, st.incumbent_score = rec.source_sha256, rec.score
        st.incumbent_result = st.results.get(rec.source_sha256)
        if source is not None:
            st.incumbent_source = source(rec.source_sha256)
        st.best = rec.score if rec.score is not None or rec.seed or rec.from_reference else st.best
        if rec.from_reference:
            st.seed_result = st.incumbent_result
    elif isinstance(rec, Iteration):
        _iteration(st, rec)
    elif isinstance(rec, Dropout):
        st.memory.mask(rec.masked)
        st.stall = 0
    elif isinstance(rec, RunEnd):
        st.ended = rec
        _snapshot(st, rec.used)
    return st


def _snapshot(st: RunState, used: BudgetUsed) -> None:
    """Take a record's cumulative usage; GPU seconds stay the sum of the evaluations (a killed
    iteration's too), wall time never runs backwards."""
    st.used = BudgetUsed(iterations=used.iterations, wall_s=max(used.wall_s, st.used.wall_s), gpu_s=st.used.gpu_s,
                         tokens=used.tokens, usd=used.usd)


def _iteration(st: RunState, rec: Iteration) -> None:
    r: IterationRecord = rec.record
    st.memory.add(r)
    st.history.append(rec)
    sha = rec.source_sha256 or ""
    if sha and sha not in st.seen:
        st.seen[sha] = r
    if not r.is_seed:
        st.stall = 0 if r.accepted else st.stall + 1
    evaluated = st.results.get(sha) if sha and r.failed_stage not in ("duplicate", "proposer") else None
    if evaluated is not None:
        st.last_result = evaluated
    elif not r.is_seed and r.lesson:   # a duplicate or a proposer error: the next prompt hears why
        st.last_result = EvalResult(op=st.op, reasons=[r.lesson])
    st.iteration = r.iteration + 1
    _snapshot(st, rec.used)


def fold(records: Iterable, source: SourceOf | None = None, state: RunState | None = None) -> RunState:
    """The state after `records` (typed records, or agent.audit.Record rows, in order)."""
    st = state if state is not None else RunState()
    for rec in records:
        typed = rec if not hasattr(rec, "body") else parse(rec)
        if typed is not None:
            step(st, typed, source)
    return st


def restore(audit, run_id: str) -> RunState:
    """The state of a recorded run, for --resume: a fold over its records."""
    recs = audit.records(run_id)
    if not any(r.kind == "run_start" for r in recs):
        raise ValueError(f"no run {run_id!r} in {audit.path}; `aka audit list` shows the runs")
    return fold(recs, audit.source)
