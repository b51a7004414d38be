"""Typed bodies of the loop's audit records: one frozen dataclass per kind, each with to/from JSON.

    RunStart    the plan of a run (op, shapes, hardware, budgets, proposer) and its config
    Evaluation  one sandbox evaluation (seed, candidate, A/B repeat or baseline) and its EvalResult
    Iteration   what one iteration left behind (its IterationRecord, usage, proposal, decision)
    Accepted    a kernel that became the incumbent, with the path it was written to
    Dropout     optimization dropout masking older memory records
    Resume      a new session of the run (`aka optimize --resume`)
    RunEnd      why a session stopped, and what it had used

The JSON layout is the one the audit trail's SQL views read (agent/audit.py), so old databases load
as these types. `parse(record)` turns an agent.audit.Record into its typed body; `typed(audit,
run_id)` reads a whole run. Readers (agent.state.fold, `aka audit show/export`) use the fields,
never string keys of the raw body.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable

from agent.budget import BudgetLimits, BudgetUsed
from agent.types import IterationRecord, Usage
from sandbox.verdict import EvalResult


def _float(v: Any) -> float | None:
    """A number as the audit trail stores it (non-finite floats are strings there)."""
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _used(d: dict | None) -> BudgetUsed:
    d = d or {}
    names = {f.name for f in dataclasses.fields(BudgetUsed)}
    return BudgetUsed(**{k: type(getattr(BudgetUsed(), k))(v) for k, v in d.items() if k in names})


@dataclass(frozen=True)
class RunStart:
    kind: ClassVar[str] = "run_start"
    op: str
    shape_set: str
    shapes: tuple[dict, ...]            # {id, dims: [[name, value], ...], dtype, phase, source, weight, hot}
    hardware: Any                       # dataclasses.asdict(Hardware), or its name
    target: float = 0.95
    proposer: str = "search"
    model: str | None = None
    rng_seed: int = 0
    dropout: bool = True
    seed_path: str = ""
    baselines: tuple[str, ...] = ()
    script: tuple[str, ...] = ()
    limits: BudgetLimits = BudgetLimits()
    config: dict = field(default_factory=dict)
    seed_source_sha256: str = ""        # "" in a --from-reference run (no seed)
    operator_sha256: str = ""
    from_reference: bool = False        # no seed: the first kernel that passes every gate is written by the proposer
    reference_tries: int = 0            # proposals the writing phase may take before the run gives up

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**d, "shapes": [dict(s) for s in self.shapes], "baselines": list(self.baselines),
                "script": list(self.script), "limits": self.limits.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "RunStart":
        return cls(op=d["op"], shape_set=d.get("shape_set", ""), shapes=tuple(d.get("shapes", ())),
                   hardware=d.get("hardware"), target=float(d.get("target", 0.95)),
                   proposer=d.get("proposer", "search"), model=d.get("model"), rng_seed=int(d.get("rng_seed", 0)),
                   dropout=bool(d.get("dropout", True)), seed_path=d.get("seed_path", ""),
                   baselines=tuple(d.get("baselines", ())), script=tuple(d.get("script", ())),
                   limits=BudgetLimits(**(d.get("limits") or {})), config=d.get("config") or {},
                   seed_source_sha256=d.get("seed_source_sha256", ""), operator_sha256=d.get("operator_sha256", ""),
                   from_reference=bool(d.get("from_reference", False)), reference_tries=int(d.get("reference_tries", 0)))

    @property
    def hardware_name(self) -> str | None:
        hw = self.hardware
        return hw.get("name") if isinstance(hw, dict) else (str(hw) if hw else None)


@dataclass(frozen=True)
class Evaluation:
    kind: ClassVar[str] = "evaluation"
    iteration: int
    # seed | candidate | screen | screen_incumbent | ab_incumbent | ab_candidate | ab_confirm | winner_holdouts |
    # baseline:NAME
    role: str
    result: dict                        # EvalResult.to_json()
    repeat: int = 0
    source_sha256: str | None = None
    baseline: str | None = None
    gpu_s: float = 0.0
    wall_s: float = 0.0
    session: int = 1

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, d: dict) -> "Evaluation":
        return cls(iteration=int(d.get("iteration", 0)), role=str(d.get("role", "")), result=d.get("result") or {},
                   repeat=int(d.get("repeat", 0)), source_sha256=d.get("source_sha256"), baseline=d.get("baseline"),
                   gpu_s=float(d.get("gpu_s") or 0.0), wall_s=float(d.get("wall_s") or 0.0),
                   session=int(d.get("session", 1)))

    def eval_result(self) -> EvalResult:
        return EvalResult.from_json(self.result)

    @property
    def full(self) -> bool:
        """A full evaluation of a kernel (not an A/B repeat or a baseline)."""
        return self.role in ("seed", "candidate")


@dataclass(frozen=True)
class ProposalInfo:
    changed: str = ""
    why: str = ""
    error: str | None = None
    meta: dict = field(default_factory=dict)

    @property
    def dropped(self) -> list[dict]:
        """Moves the search dropped before the GPU since its previous proposal: {changed, why} each."""
        return list(self.meta.get("dropped") or ())


@dataclass(frozen=True)
class Iteration:
    kind: ClassVar[str] = "iteration"
    record: IterationRecord
    source_sha256: str | None = None
    usage: Usage | None = None          # None for the seed
    proposal: ProposalInfo | None = None
    decision: dict | None = None        # agent.acceptance.Decision.to_json()
    flags: tuple[str, ...] = ()
    used: BudgetUsed = BudgetUsed()     # cumulative, after this iteration
    session: int = 1

    def to_json(self) -> dict:
        return {"record": dataclasses.asdict(self.record), "source_sha256": self.source_sha256,
                "usage": dataclasses.asdict(self.usage) if self.usage is not None else None,
                "proposal": dataclasses.asdict(self.proposal) if self.proposal is not None else None,
                "decision": self.decision, "flags": list(self.flags), "used": self.used.to_json(),
                "session": self.session}

    @classmethod
    def from_json(cls, d: dict) -> "Iteration":
        r = dict(d["record"])
        r["score"] = _float(r.get("score"))
        names = {f.name for f in dataclasses.fields(IterationRecord)}
        u, p = d.get("usage"), d.get("proposal")
        return cls(record=IterationRecord(**{k: v for k, v in r.items() if k in names}),
                   source_sha256=d.get("source_sha256"),
                   usage=Usage(**{k: v for k, v in u.items() if k in {f.name for f in dataclasses.fields(Usage)}})
                   if u else None,
                   proposal=ProposalInfo(p.get("changed", ""), p.get("why", ""), p.get("error"), p.get("meta") or {})
                   if p else None,
                   decision=d.get("decision"), flags=tuple(d.get("flags") or ()), used=_used(d.get("used")),
                   session=int(d.get("session", 1)))

    @property
    def iteration(self) -> int:
        return self.record.iteration


@dataclass(frozen=True)
class Accepted:
    kind: ClassVar[str] = "accepted"
    iteration: int
    source_sha256: str
    path: str = ""
    score: float | None = None
    seed: bool = False
    passed: bool = True                 # the seed's own verdict (a failing seed is still the first incumbent)
    from_reference: bool = False        # the first incumbent of a --from-reference run, written from the reference

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, d: dict) -> "Accepted":
        return cls(int(d["iteration"]), d["source_sha256"], d.get("path", ""), _float(d.get("score")),
                   bool(d.get("seed", False)), bool(d.get("passed", True)), bool(d.get("from_reference", False)))


@dataclass(frozen=True)
class Dropout:
    kind: ClassVar[str] = "dropout"
    iteration: int
    masked: tuple[int, ...]
    protected: tuple[int, ...] = ()
    eligible: int = 0
    rng_seed: int = 0
    p: float = 0.0
    patience: int = 0
    stalled_iterations: int = 0

    def to_json(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                "masked": list(self.masked), "protected": list(self.protected)}

    @classmethod
    def from_json(cls, d: dict) -> "Dropout":
        return cls(int(d["iteration"]), tuple(int(i) for i in d.get("masked", ())),
                   tuple(int(i) for i in d.get("protected", ())), int(d.get("eligible", 0)),
                   int(d.get("rng_seed", 0)), float(d.get("p", 0.0)), int(d.get("patience", 0)),
                   int(d.get("stalled_iterations", 0)))


@dataclass(frozen=True)
class Resume:
    kind: ClassVar[str] = "resume"
    session: int
    next_iteration: int
    used: BudgetUsed = BudgetUsed()
    limits: BudgetLimits = BudgetLimits()
    pid: int | None = None
    host: str = ""

    def to_json(self) -> dict:
        return {"session": self.session, "next_iteration": self.next_iteration, "used": self.used.to_json(),
                "limits": self.limits.to_json(), "pid": self.pid, "host": self.host}

    @classmethod
    def from_json(cls, d: dict) -> "Resume":
        return cls(int(d.get("session", 2)), int(d.get("next_iteration", 0)), _used(d.get("used")),
                   BudgetLimits(**(d.get("limits") or {})), d.get("pid"), d.get("host", ""))


@dataclass(frozen=True)
class RunEnd:
    kind: ClassVar[str] = "run_end"
    reason: str
    used: BudgetUsed = BudgetUsed()
    score: float | None = None
    s_i: float | None = None
    incumbent_sha256: str | None = None
    session: int = 1
    exit_code: int | None = None

    def to_json(self) -> dict:
        return {"reason": self.reason, "used": self.used.to_json(), "score": self.score, "s_i": self.s_i,
                "incumbent_sha256": self.incumbent_sha256, "session": self.session, "exit_code": self.exit_code}

    @classmethod
    def from_json(cls, d: dict) -> "RunEnd":
        return cls(d.get("reason", ""), _used(d.get("used")), _float(d.get("score")), _float(d.get("s_i")),
                   d.get("incumbent_sha256"), int(d.get("session", 1)), d.get("exit_code"))


RunRecord = RunStart | Evaluation | Iteration | Accepted | Dropout | Resume | RunEnd
TYPES: dict[str, type] = {t.kind: t for t in (RunStart, Evaluation, Iteration, Accepted, Dropout, Resume, RunEnd)}


def parse(record: Any) -> RunRecord | None:
    """The typed body of an agent.audit.Record (None for kinds the loop does not write, e.g. `note`)."""
    t = TYPES.get(record.kind)
    return t.from_json(record.body) if t is not None else None


def typed(audit: Any, run_id: str) -> list[RunRecord]:
    """Every typed record of one run, in order."""
    return [r for r in (parse(x) for x in audit.records(run_id)) if r is not None]


def append(audit: Any, run_id: str, *records: RunRecord) -> list:
    """Append typed records in one transaction (all of them land, or none)."""
    return audit.append_many([(run_id, r.kind, r.to_json()) for r in records])


def of(records: Iterable[RunRecord], kind: type) -> list:
    return [r for r in records if isinstance(r, kind)]
