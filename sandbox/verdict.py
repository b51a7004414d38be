"""Typed results of one evaluation: picklable and JSON-serializable.

The sandbox fills these in the parent process; the agent, the CLI and the
audit trail read them. `to_json()` is the record `aka bench --json` writes
(DESIGN.md section 3).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

STAGES = ("lint", "compile", "correctness", "dsl", "timing")


@dataclass
class ShapeResult:
    id: str
    dims: dict[str, int]
    dtype: str
    weight: float
    t_us: float | None = None            # CUDA-graph replay, L2 cold, median (or eager when graphs failed)
    t_eager_us: float | None = None      # eager launches, L2 cold, median
    t_roof_us: float | None = None
    t_floor_us: float | None = None
    attainment: float | None = None      # None under the interpreter: its timings are not scores
    bound: str | None = None             # "memory" | "compute"
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2: float | None = None
    timing_mode: str | None = None       # "graph" | "eager" | "interpreter"
    holdout: bool = False                # hidden shape: never shown to a proposer
    suspect: bool = False                # T_ref / T > 1: re-measured and flagged, never rewarded
    error: str | None = None
    ran_dims: dict[str, int] | None = None   # the dims that actually ran when not `dims` (the interpreter's
                                             # scaled-down shapes); `dims` and t_roof_us are the hot shape's
    launches: Any = None                 # sandbox.launch_record.ShapeLaunches (visible shapes of a candidate only)

    def __post_init__(self) -> None:
        if isinstance(self.launches, dict):     # read back from JSON
            from sandbox.launch_record import ShapeLaunches
            self.launches = ShapeLaunches.from_json(self.launches)

    @property
    def passed(self) -> bool:
        return self.error is None


@dataclass
class EvalResult:
    op: str
    verdict: str = "rejected"                 # "accepted" | "rejected"
    failed_stage: str | None = None           # one of STAGES, or None when accepted
    reasons: list[str] = field(default_factory=list)
    shapes: list[ShapeResult] = field(default_factory=list)
    hardware: str | None = None
    ceilings: dict[str, Any] = field(default_factory=dict)   # source, bandwidth, peaks used
    s_i: float | None = None
    weighted_attainment: float | None = None
    compile_info: dict[str, Any] = field(default_factory=dict)  # per kernel: registers, spills, shared, features
    dsl_share: float | None = None            # share of compute-kernel time in the candidate's own @triton.jit kernels
    # Per profiled shape: own / foreign compute / neutral (memset, memcpy, fill) µs and the foreign kernels' names.
    attribution: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    interpreter: bool = False
    # Set when a rejection under Triton's CPU interpreter is the interpreter's limit, not the candidate's
    # fault (e.g. libdevice is not implemented there): the verdict says "unknown on this machine".
    interpreter_limitation: str | None = None
    flags: list[str] = field(default_factory=list)   # "flagged for review" notes
    stdout_tail: str = ""
    stderr_tail: str = ""
    wall_s: float | None = None
    # (stage, seconds) in the order the stages ran (sandbox/stage_times.py); set once, when the evaluation ends
    stage_times: tuple[tuple[str, float], ...] = ()

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    def reject(self, stage: str, reason: str) -> "EvalResult":
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {STAGES}")
        self.verdict = "rejected"
        if self.failed_stage is None:
            self.failed_stage = stage
        self.reasons.append(reason)
        return self

    def visible_shapes(self) -> list[ShapeResult]:
        """Shapes a proposer may see: hold-out shapes are reported only as a count."""
        return [s for s in self.shapes if not s.holdout]

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shapes"] = [{**dataclasses.asdict(s), "launches": s.launches.to_json() if s.launches is not None else None}
                       for s in self.shapes]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "EvalResult":
        d = dict(d)
        shapes = [ShapeResult(**s) for s in d.pop("shapes", [])]
        known = {f.name for f in dataclasses.fields(EvalResult)}
        if "stage_times" in d:
            d["stage_times"] = tuple((str(k), float(v)) for k, v in d["stage_times"])
        return EvalResult(shapes=shapes, **{k: v for k, v in d.items() if k in known})
