"""Iteration memory, optimization dropout, lessons, and the hold-out redaction every prompt goes through.

Memory keeps one IterationRecord per iteration. On a stall (no candidate accepted for
`dropout.patience` iterations) the loop calls `dropout()`: a random fraction p of the older records is
masked, and masked records never leave this object -- `visible()` is the only way to read records,
and it skips them. So the proposer's context (ProposalContext.memory) cannot carry a masked record:
there is no path from a masked record to the prompt builder. Three records are never masked: the
seed's, the latest, and the latest accepted one (the agent must always know where it started, what
it just tried, and what currently wins).

Hold-out shapes are hidden from proposers: `redact_holdout()` drops them from an EvalResult and
replaces any reason that names their dims with a line that says "a hidden shape"; lessons are
built from redacted results only.

`RunState` is everything the loop carries between iterations; `restore()` rebuilds it from the
audit trail for --resume.
"""
from __future__ import annotations

import copy
import random
import re
import time
from dataclasses import dataclass, field
from itertools import combinations
from math import prod
from typing import Iterable

from agent.budget import BudgetUsed
from agent.types import IterationRecord
from sandbox.verdict import EvalResult, ShapeResult


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


# ---- hold-out redaction ---------------------------------------------------------------------
def _secret_numbers(holdout: list[ShapeResult], visible: list[ShapeResult]) -> set[str]:
    """Dims of hidden shapes and their products (tensor sizes), minus numbers visible shapes also have."""
    def numbers(rows: list[ShapeResult]) -> set[int]:
        out: set[int] = set()
        for r in rows:
            vals = [int(v) for v in r.dims.values()]
            for n in range(1, len(vals) + 1):
                out.update(prod(c) for c in combinations(vals, n))
        return out
    return {str(n) for n in numbers(holdout) - numbers(visible) if n > 1}


def _mentions(text: str, ids: set[str], secrets: set[str]) -> bool:
    if any(i and i in text for i in ids):
        return True
    return any(n in secrets for n in re.findall(r"\d+", text))


def _hidden_line(row: ShapeResult) -> str:
    detail = []
    if row.max_rel_err is not None:
        detail.append(f"max_rel_err {row.max_rel_err:.3g}")
    if row.rel_l2 is not None:
        detail.append(f"rel_l2 {row.rel_l2:.3g}")
    if not detail and row.error:
        head = row.error.split(":", 1)[0].strip()
        detail.append(head if re.fullmatch(r"[A-Za-z_][\w .-]{0,40}", head) and not re.search(r"\d", head)
                      else "failed")
    return "a hidden shape: " + (", ".join(detail) or "failed")


def redact_holdout(result: EvalResult, keep_hidden_rows: bool = False) -> EvalResult:
    """A copy of `result` a proposer may see: no hold-out rows, no text that names their dims.

    `keep_hidden_rows`: leave the hold-out rows in (for agent.feedback, which reports them only as
    counts) while still scrubbing every reason, flag and output tail."""
    out = copy.deepcopy(result)
    hidden = [s for s in out.shapes if s.holdout]
    if not hidden:
        return out
    visible = [s for s in out.shapes if not s.holdout]
    ids = {s.id for s in hidden}
    secrets = _secret_numbers(hidden, visible)
    failed_hidden = [s for s in hidden if s.error is not None]
    generic = [_hidden_line(s) for s in failed_hidden] or ["a hidden shape"]

    def scrub(lines: list[str]) -> list[str]:
        kept, dropped = [], False
        for line in lines:
            if _mentions(line, ids, secrets):
                dropped = True
            else:
                kept.append(line)
        return kept + (generic if dropped else [])

    out.reasons = list(dict.fromkeys(scrub(out.reasons)))
    out.flags = list(dict.fromkeys(scrub(out.flags)))
    out.stdout_tail = "" if _mentions(out.stdout_tail, ids, secrets) else out.stdout_tail
    out.stderr_tail = "" if _mentions(out.stderr_tail, ids, secrets) else out.stderr_tail
    if not keep_hidden_rows:
        out.shapes = visible
        out.flags.append(f"{len(hidden)} hidden shapes checked, {len(failed_hidden)} failed")
    return out


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
            return _one_line(f"rejected at {stage}: {_hidden_line(row)}")
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


# ---- the loop's state, and restoring it from the audit trail on --resume ----------------------
@dataclass
class RunState:
    """Everything the loop carries between iterations. Rebuilt from the audit records by `restore`."""

    memory: Memory
    incumbent_source: str = ""
    incumbent_sha: str = ""
    incumbent_result: EvalResult | None = None
    incumbent_score: float | None = None
    seed_result: EvalResult | None = None
    last_result: EvalResult | None = None
    best: float | None = None
    iteration: int = 0                 # the next iteration's number (0: the seed is still to be evaluated)
    stall: int = 0                     # iterations since the last acceptance or dropout
    used: BudgetUsed = BudgetUsed()
    seen: dict = field(default_factory=dict)     # sha256 -> IterationRecord of rejected candidates
    session: int = 1                   # 1 for the first process of a run, +1 per --resume
    interpreter: bool = False
    clock: float = field(default_factory=time.monotonic)


def restore(audit, run_id: str) -> RunState:
    """The state a run had after its last recorded iteration: incumbent, memory (with its masks),
    budgets used, iteration counter. Evaluations of an iteration cut short by a kill count towards
    the GPU budget (the GPU time was spent) but the iteration itself is run again."""
    recs = audit.records(run_id)
    if not any(r.kind == "run_start" for r in recs):
        raise ValueError(f"no run {run_id!r} in {audit.path}; `aka audit list` shows the runs")
    st = RunState(memory=Memory(), session=2 + sum(r.kind == "resume" for r in recs))   # this new session
    evals = [r for r in recs if r.kind == "evaluation"]
    iters = [r for r in recs if r.kind == "iteration"]
    accepted = [r for r in recs if r.kind == "accepted"]
    dropouts = [r for r in recs if r.kind == "dropout"]
    seed_eval = next((r for r in evals if r.body.get("role") == "seed"), None)
    st.seed_result = EvalResult.from_json(seed_eval.body["result"]) if seed_eval else None
    st.interpreter = bool(st.seed_result and st.seed_result.interpreter)
    masked = [i for d in dropouts for i in d.body.get("masked", [])]
    records = [IterationRecord(**r.body["record"]) for r in iters]
    st.memory = Memory(records, masked)
    for rec in records:
        if rec.candidate_hash and not rec.accepted:
            st.seen[rec.candidate_hash] = rec
    if accepted:
        last = accepted[-1].body
        st.incumbent_sha, st.incumbent_score = last["source_sha256"], last.get("score")
        st.incumbent_source = audit.source(st.incumbent_sha)
        match = [r for r in evals if r.body.get("iteration") == last["iteration"] and
                 r.body.get("source_sha256") == st.incumbent_sha and r.body.get("role") in ("seed", "candidate")]
        st.incumbent_result = EvalResult.from_json(match[-1].body["result"]) if match else None
        st.best = st.incumbent_score
    if iters:
        st.iteration = max(r.iteration for r in records) + 1
        last_eval = [r for r in evals if r.body.get("iteration") == records[-1].iteration and
                     r.body.get("role") == "candidate"]
        st.last_result = EvalResult.from_json(last_eval[-1].body["result"]) if last_eval else None
    last_acc = max((r.iteration for r in records if r.accepted), default=0)
    last_drop = max((d.body["iteration"] for d in dropouts), default=0)
    reset_at = max(last_acc + 1, last_drop)
    st.stall = sum(1 for r in records if r.iteration >= reset_at and not r.is_seed)
    wall = max((r.body.get("used", {}).get("wall_s", 0.0) for r in recs
                if r.kind in ("iteration", "run_end", "resume") and r.body.get("used")), default=0.0)
    usage = [r.body.get("usage") or {} for r in iters]
    st.used = BudgetUsed(iterations=sum(1 for r in records if not r.is_seed), wall_s=float(wall),
                         gpu_s=sum(float(r.body.get("gpu_s") or 0.0) for r in evals),
                         tokens=sum(int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0)) for u in usage),
                         usd=sum(float(u.get("usd", 0.0)) for u in usage))
    return st
