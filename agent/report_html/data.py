"""What the HTML report shows of a run, read from the audit trail into plain frozen values.

`run_report` is the one place that parses audit record bodies for the report: when the run records
become typed (agent/records.py), only this function changes; the charts and pages read RunReport.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sandbox.verdict import EvalResult


@dataclass(frozen=True)
class IterationPoint:
    iteration: int
    score: float | None              # weighted attainment (the number the loop climbs); None untimed
    verdict: str
    accepted: bool
    failed_stage: str | None
    changed: str
    lesson: str
    is_seed: bool = False


@dataclass(frozen=True)
class ShapeInfo:
    id: str
    dims: dict[str, int]
    dtype: str
    phase: str
    weight: float
    flops: float                     # W summed over dtypes
    bytes: float                     # Q
    t_roof_us: float
    bound: str                       # "memory" | "compute"
    peak_flops: float                # the peak the roofline uses for this shape's W mix


@dataclass(frozen=True)
class RunReport:
    run_id: str
    op: str
    shape_set: str
    proposer: str
    model: str | None
    started: str                     # ISO timestamp of run_start
    end_reason: str | None           # None: still running, or killed
    hardware: dict[str, Any]
    bandwidth_tbs: float
    shapes: tuple[ShapeInfo, ...]
    seed: EvalResult | None
    final: EvalResult | None
    final_iteration: int | None
    final_sha: str | None
    iterations: tuple[IterationPoint, ...]
    dropouts: tuple[int, ...]        # iterations a dropout preceded
    decision: dict[str, Any] = field(default_factory=dict)   # the final acceptance: A/B samples, gain, noise
    baselines: dict[str, EvalResult] = field(default_factory=dict)
    seed_source: str = ""
    final_source: str = ""
    weights_source: str = ""         # a weights file that re-weighed the shapes and scores (aka report --weights)

    @property
    def interpreter(self) -> bool:
        return bool(self.seed is not None and self.seed.interpreter)

    @property
    def accepted_count(self) -> int:
        return sum(1 for p in self.iterations if p.accepted and not p.is_seed)

    def diff(self) -> list[str]:
        """Unified diff of the final kernel against the seed ([] when the seed is still the incumbent)."""
        if not self.final_source or self.final_source == self.seed_source:
            return []
        return list(difflib.unified_diff(self.seed_source.splitlines(), self.final_source.splitlines(),
                                         "seed.py", f"accepted-{self.final_iteration}.py", lineterm=""))


def _shape_info(spec, hw: dict, s: dict) -> ShapeInfo:
    from benchmarks.hardware import Hardware
    from benchmarks.roofline import roofline
    from benchmarks.spec import Shape
    shape = Shape.make(**{**s, "dims": dict(s["dims"])})
    W, Q = spec.work(shape)
    known = {k: hw[k] for k in ("name", "gpu_name", "peaks_tflops", "bandwidth_tbs", "sm_count", "l2_mb", "source")
             if k in hw}
    hardware = Hardware(**known)
    rl = roofline(W, Q, hardware)
    flops = float(sum(W.values()))
    compute_s = sum(w / hardware.peak_flops(d) for d, w in W.items())
    return ShapeInfo(shape.id, shape.dim, shape.dtype, shape.phase, shape.weight, flops, Q, rl.t_roof_s * 1e6,
                     rl.bound, flops / compute_s if compute_s > 0 else 0.0)


def _reweighed(weights, spec, shapes: list[dict]) -> list[dict]:
    """The run's shapes with a weights file's weights (benchmarks/weights_file.py)."""
    from benchmarks.spec import Shape
    objs = [Shape.make(**{**s, "dims": dict(s["dims"])}) for s in shapes]
    new = {s.id: s.weight for s in weights.reweigh(spec.name, objs, known=list(spec.shapes) + objs)}
    return [{**s, "weight": new[s["id"]]} for s in shapes]


def run_report(audit, run_id: str, weights=None) -> RunReport:
    """Everything the report shows of one run. The only reader of record bodies for the report: it reads
    the raw JSON layout of agent/audit.py's views (stable across the typed records of agent/records.py,
    which it can switch to: records.typed(audit, run_id)). `weights` (benchmarks.weights_file.WeightsFile)
    re-weighs the shapes, and each iteration's score is then the weight-averaged attainment of its recorded
    per-shape attainments under those weights."""
    from benchmarks.weights_file import reweighted_score
    from agent.audit import AuditError
    from agent.run_floor import RunFloor, pin_floor
    from benchmarks.registry import load_operator
    records = audit.records(run_id)
    of = lambda kind: [r for r in records if r.kind == kind]   # noqa: E731
    starts = of("run_start")
    if not starts:
        raise AuditError(f"no run {run_id!r} in {audit.path}; `aka audit list` shows the runs")
    start = starts[0].body
    hw = start.get("hardware") if isinstance(start.get("hardware"), dict) else {}
    spec = load_operator(start["op"])
    run_shapes = start.get("shapes", [])
    if weights is not None:
        run_shapes = _reweighed(weights, spec, run_shapes)
    shapes = tuple(_shape_info(spec, hw, s) for s in run_shapes)
    points, decisions = [], {}
    for r in of("iteration"):
        rec = r.body["record"]
        score = rec.get("score")
        if weights is not None and score is not None:
            score = reweighted_score(rec.get("per_shape") or {}, {s.id: s.weight for s in shapes})
        points.append(IterationPoint(rec["iteration"], score, rec["verdict"], bool(rec.get("accepted")),
                                     rec.get("failed_stage"), rec.get("changed", ""), rec.get("lesson", ""),
                                     bool(rec.get("is_seed"))))
        decisions[rec["iteration"]] = r.body.get("decision") or {}
    accepted = [r.body for r in of("accepted")]
    final = accepted[-1] if accepted else None
    final_iteration = final["iteration"] if final else None

    def evaluation(iteration, sha=None, roles=("seed", "candidate")):
        hits = [r.body for r in of("evaluation") if r.body.get("iteration") == iteration
                and r.body.get("role") in roles and (sha is None or r.body.get("source_sha256") == sha)]
        return EvalResult.from_json(hits[-1]["result"]) if hits else None

    baselines = {r.body["role"].split(":", 1)[1]: EvalResult.from_json(r.body["result"])
                 for r in of("evaluation") if str(r.body.get("role", "")).startswith("baseline:")}
    # seed, final and baselines on the one floor the run compared everything with (agent/run_floor.py), not
    # each on the floor its own process read
    floor = RunFloor.of((str(r.body.get("role", "")), int(r.body.get("iteration", 0)),
                         lambda r=r: EvalResult.from_json(r.body["result"])) for r in of("evaluation")).floor_us
    seed_result = pin_floor(evaluation(0, roles=("seed",)), floor)
    final_result = pin_floor(evaluation(final_iteration, final["source_sha256"]), floor) if final else None
    for b in baselines.values():
        pin_floor(b, floor)
    ends = of("run_end")
    seed_sha = start.get("seed_source_sha256")
    return RunReport(
        run_id=run_id, op=start["op"], shape_set=start.get("shape_set", ""), proposer=start.get("proposer", ""),
        model=start.get("model"), started=starts[0].ts, end_reason=ends[-1].body.get("reason") if ends else None,
        hardware=hw, bandwidth_tbs=float(hw.get("bandwidth_tbs", 0.0)), shapes=shapes,
        seed=seed_result, final=final_result,
        final_iteration=final_iteration, final_sha=final["source_sha256"] if final else None,
        iterations=tuple(points), dropouts=tuple(int(d.body["iteration"]) for d in of("dropout")),
        decision=decisions.get(final_iteration, {}) if final and not final.get("seed") else {},
        baselines=baselines, seed_source=audit.source(seed_sha) if seed_sha else "",
        final_source=audit.source(final["source_sha256"]) if final else "",
        weights_source=weights.path if weights is not None else "")


def select_runs(audit, names: list[str], since: datetime | None) -> list[str]:
    """Run ids from names (ids, unique prefixes, `last`) and/or a start date; all runs when neither is given."""
    ids = [audit.resolve_run(n) for n in names]
    if since is not None:
        for r in audit.records(kind="run_start"):
            if datetime.fromisoformat(r.ts) >= since and r.run_id not in ids:
                ids.append(r.run_id)
    if not names and since is None:
        ids = audit.run_ids()
    seen: set[str] = set()
    return [i for i in ids if not (i in seen or seen.add(i))]
