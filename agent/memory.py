"""Iteration memory, optimization dropout, lessons, and the hold-out redaction every prompt goes through.

Memory keeps one IterationRecord per iteration. On a stall (no candidate accepted for
`dropout.patience` iterations) the loop calls `dropout()`: a random fraction p of the older records is
masked, and masked records never leave this object -- `visible()` is the only way to read records,
and it skips them. So the proposer's context (ProposalContext.memory) cannot carry a masked record:
there is no path from a masked record to the prompt builder. Three records are never masked: the
seed's, the latest, and the latest accepted one (the agent must always know where it started, what
it just tried, and what currently wins).

Hold-out shapes are hidden from proposers by the one redaction in agent/holdout.py; lessons are
built from redacted results only. The run state and its rebuilding on --resume: agent/state.py.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable

from agent.holdout import hidden_line, redact_holdout
from agent.types import IterationRecord
from sandbox.verdict import EvalResult, ShapeResult

__all__ = ["DropoutEvent", "Memory", "lesson", "redact_holdout", "visible_per_shape"]


@dataclass(frozen=True)
class DropoutEvent:
    iteration: int            # the iteration whose context was rebuilt
    masked: tuple[int, ...]   # iterations masked by this event
    protected: tuple[int, ...]
    eligible: int             # how many records could have been masked
    rng_seed: int
    p: float


class Memory:
    """Iteration records of one run; hands out only the unmasked ones."""

    def __init__(self, records: Iterable[IterationRecord] = (), masked: Iterable[int] = ()):
        self._records: dict[int, IterationRecord] = {}
        self._masked: set[int] = set()
        for r in records:
            self.add(r)
        self._masked.update(int(i) for i in masked)

    def add(self, record: IterationRecord) -> None:
        self._records[record.iteration] = record

    def mask(self, iterations: Iterable[int]) -> None:
        """Mask these iterations (replaying a recorded dropout event; masking twice is a no-op)."""
        self._masked.update(int(i) for i in iterations)

    def visible(self) -> tuple[IterationRecord, ...]:
        """The records a prompt may use, oldest first. Masked records are not among them."""
        return tuple(self._records[i] for i in sorted(self._records) if i not in self._masked)

    @property
    def masked_iterations(self) -> frozenset[int]:
        return frozenset(self._masked)

    def __len__(self) -> int:
        return len(self._records)

    def protected(self) -> tuple[int, ...]:
        """Iterations never masked: the seed, the latest, the latest accepted."""
        its = sorted(self._records)
        keep = {i for i in its if self._records[i].is_seed}
        if its:
            keep.add(its[-1])
        accepted = [i for i in its if self._records[i].accepted]
        if accepted:
            keep.add(accepted[-1])
        return tuple(sorted(keep))

    def dropout(self, iteration: int, p: float, rng_seed: int) -> DropoutEvent:
        """Mask round(p * n) of the n unmasked, unprotected records, chosen with random.Random(rng_seed)."""
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout p={p} must be in [0, 1); set dropout.p in the config")
        protected = self.protected()
        eligible = [i for i in sorted(self._records) if i not in self._masked and i not in protected]
        k = int(p * len(eligible) + 0.5)
        chosen = sorted(random.Random(rng_seed).sample(eligible, k)) if k else []
        self._masked.update(chosen)
        return DropoutEvent(iteration, tuple(chosen), protected, len(eligible), rng_seed, p)

    def summary(self) -> str:
        """A few lines on the whole run (masked records included only as counts), for a fresh context."""
        recs = list(self._records.values())
        if not recs:
            return ""
        accepted = [r for r in recs if r.accepted and not r.is_seed]
        stages: dict[str, int] = {}
        for r in recs:
            if not r.accepted and r.failed_stage:
                stages[r.failed_stage] = stages.get(r.failed_stage, 0) + 1
        scores = [r.score for r in recs if r.accepted and r.score is not None]
        best = f"{max(scores):.3f}" if scores else "n/a"
        failures = ", ".join(f"{k} {v}" for k, v in sorted(stages.items())) or "none"
        return (f"Run so far: {len(recs)} iterations, {len(accepted)} candidates accepted, best score {best}; "
                f"rejections by stage: {failures}. {len(self._masked)} older records were set aside to give a "
                f"fresh start: try a direction unlike the recent ones.")


# ---- per-shape attainment --------------------------------------------------------------
def visible_per_shape(result: EvalResult | None) -> dict[str, float]:
    """Visible shape id -> attainment (a failed shape counts 0; shapes without a score are left out)."""
    if result is None:
        return {}
    out = {}
    for s in result.visible_shapes():
        if s.error is not None:
            out[s.id] = 0.0
        elif s.attainment is not None:
            out[s.id] = float(s.attainment)
    return out


# ---- lessons --------------------------------------------------------------------------------
def lesson(result: EvalResult | None, *, accepted: bool, decision: str = "", error: str | None = None) -> str:
    """One deterministic line the next prompt can use. Never names a hidden shape's dims."""
    if error:
        return _one_line(f"no candidate: {error}")
    if result is None:
        return "not evaluated"
    if accepted:
        return _one_line(f"accepted: {decision}" if decision else "accepted")
    if result.accepted:
        return _one_line(f"passed every gate but kept the incumbent: {decision}" if decision
                         else "passed every gate but kept the incumbent")
    failing = [s for s in result.shapes if s.error is not None]
    stage = result.failed_stage or "sandbox"
    if failing:
        row = failing[0]
        if row.holdout:
            return _one_line(f"rejected at {stage}: {hidden_line(row)}")
        metric = f"max_rel_err {row.max_rel_err:.3g} " if row.max_rel_err is not None else ""
        why = metric or (row.error or "failed") + " "
        return _one_line(f"rejected at {stage}: {why.strip()} on {row.id} ({_label(row)})")
    reasons = redact_holdout(result).reasons
    return _one_line(f"rejected at {stage}: {reasons[0] if reasons else 'no reason given'}")


def _label(row: ShapeResult) -> str:
    return " ".join(f"{k}={v}" for k, v in row.dims.items())


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
