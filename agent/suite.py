"""The suite's score: every operator scored through the sandbox, combined into S_agg = sum_i w_i S_i.

Which kernel stands for each operator (`--kernels`): the seed by default; a folder holding `<op>.py` files
(an `aka audit export` bundle, or a folder of them) or `<op>/best.py`; or a run id from the audit trail, whose
final accepted kernel is used (of several named runs for one operator, the one with the higher recorded
score, else the later one). Operators no kernel is named for keep their seed, and the table says so.

w_i is operator i's share of the set (the sum of its shapes' weights in the chosen set, normalized over
the operators scored), or the operator's share in a weights file from `aka weights --from-trace`.
A rejected kernel scores S_i = 0 on a GPU (its shapes failed); under the interpreter nothing is
scored (its timings are not scores) and S_agg is reported as not scored.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from benchmarks.scoring import aggregate, normalize, operator_weight
from sandbox.verdict import EvalResult


class SuiteError(ValueError):
    """A user mistake in naming kernels or operators; the message says the value and the fix."""


@dataclass(frozen=True)
class KernelChoice:
    op: str
    label: str            # "seed", a file path, "run RUN_ID iteration N", or "baseline NAME"
    source: str           # the kernel's text ("" for a baseline)
    baseline: str | None = None


@dataclass(frozen=True)
class OperatorScore:
    op: str
    kernel: str
    weight: float                    # w_i, normalized over the operators scored
    s_i: float | None                # against the primary ceilings; None: not scored (interpreter)
    s_i_other: float | None          # against the other ceilings (datasheet vs calibrated); None if absent
    verdict: str
    failed_stage: str | None
    reasons: tuple[str, ...]
    failed_shapes: tuple[tuple[str, str], ...]   # (shape id or "(hold-out)", error)
    result: EvalResult = dataclasses.field(repr=False, compare=False)


@dataclass(frozen=True)
class SuiteScore:
    shape_set: str
    primary: str                     # e.g. "h200 calibrated"
    other: str | None
    interpreter: bool
    operators: tuple[OperatorScore, ...]
    s_agg: float | None
    s_agg_other: float | None
    weights_source: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "suite", "shape_set": self.shape_set, "ceilings": self.primary, "ceilings_other": self.other,
                "interpreter": self.interpreter, "weights_source": self.weights_source,
                "s_agg": self.s_agg, "s_agg_other": self.s_agg_other,
                "operators": [{"op": o.op, "kernel": o.kernel, "weight": o.weight, "s_i": o.s_i,
                               "s_i_other": o.s_i_other, "verdict": o.verdict, "failed_stage": o.failed_stage,
                               "reasons": list(o.reasons),
                               "failed_shapes": [{"shape": s, "error": e} for s, e in o.failed_shapes],
                               "result": o.result.to_json()} for o in self.operators]}


# ---- which operators, which weights ------------------------------------------------------------
def pick_operators(known: list[str], only: list[str]) -> list[str]:
    """The registry's operators, or the named subset (comma-separated or repeated --ops)."""
    wanted = [x.strip() for item in only for x in item.split(",") if x.strip()]
    unknown = [x for x in wanted if x not in known]
    if unknown:
        raise SuiteError(f"--ops {', '.join(unknown)}: no such operator; known: {', '.join(known)}")
    return [x for x in known if x in wanted] if wanted else list(known)


def shape_set_weights(specs: Mapping[str, Any], shape_set: str) -> dict[str, float]:
    """w_i before normalization: the sum of the operator's shape weights in the set."""
    return {op: operator_weight(s.weight for s in spec.select(shape_set)) for op, spec in specs.items()}


# ---- which kernel per operator -----------------------------------------------------------------
def resolve_kernels(names: list[str], ops: list[str], seeds: Mapping[str, str], audit=None) -> dict[str, KernelChoice]:
    """One KernelChoice per operator in `ops`: from a folder, from runs in the audit trail, else the seed."""
    chosen: dict[str, KernelChoice] = {}
    scores: dict[str, float | None] = {}
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = _from_folder(path, ops)
            if not found:
                raise SuiteError(f"--kernels {name}: the folder holds none of {', '.join(f'{o}.py' for o in ops)} "
                                 f"(or <op>/best.py); name a folder of kernels or a run id")
            chosen.update(found)
            continue
        if audit is None:
            raise SuiteError(f"--kernels {name}: not a folder, and there is no audit trail to look up a run in "
                             f"(`aka optimize` creates it)")
        op, choice, score = _from_run(audit, name)
        if op not in ops:
            continue    # a run of an operator outside --ops
        if op in chosen and op in scores and not _better(score, scores[op]):
            continue
        chosen[op], scores[op] = choice, score
    for op in ops:
        chosen.setdefault(op, KernelChoice(op, "seed", Path(seeds[op]).read_text()))
    return {op: chosen[op] for op in ops}


def _better(new: float | None, old: float | None) -> bool:
    if new is None or old is None:
        return True          # not comparable (interpreter runs): the later run named wins
    return new > old


def _from_folder(folder: Path, ops: list[str]) -> dict[str, KernelChoice]:
    out = {}
    for op in ops:
        for candidate in (folder / f"{op}.py", folder / op / "best.py"):
            if candidate.is_file():
                out[op] = KernelChoice(op, str(candidate), candidate.read_text())
                break
    return out


def _from_run(audit, name: str) -> tuple[str, KernelChoice, float | None]:
    """The run's final accepted kernel, read from the raw record bodies (their layout is the audit views')."""
    from agent.audit import AuditError
    try:
        run_id = audit.resolve_run(name)
        start = audit.records(run_id, "run_start")[0].body
        accepted = audit.records(run_id, "accepted")
        if not accepted:
            raise AuditError(f"run {run_id} has no accepted kernel yet (not even the seed's verdict)")
        final = accepted[-1].body
        source = audit.source(final["source_sha256"])
    except AuditError as e:
        raise SuiteError(f"--kernels {name}: {e}")
    op = start["op"]
    label = f"run {run_id} iteration {final['iteration']}" + (" (seed)" if final.get("seed") else "")
    return op, KernelChoice(op, label, source), final.get("score")


# ---- scoring -----------------------------------------------------------------------------------
def failed_shapes(result: EvalResult) -> tuple[tuple[str, str], ...]:
    """Every shape that failed, hold-outs by count only (their dims are never shown)."""
    return tuple(("(hold-out)" if r.holdout else r.id, r.error) for r in result.shapes if r.error is not None)


def operator_s_i(result: EvalResult, other_hw=None) -> tuple[float | None, float | None]:
    """(S_i against the result's ceilings, S_i against other_hw). A rejected kernel on a GPU scores 0;
    under the interpreter nothing is scored."""
    from agent.report import rescore
    if result.interpreter:
        return None, None
    if not result.accepted:
        return 0.0, (0.0 if other_hw is not None else None)
    alt = rescore(result, other_hw).s_i if other_hw is not None else None
    return result.s_i, alt


def score_suite(shape_set: str, choices: Mapping[str, KernelChoice], results: Mapping[str, EvalResult],
                raw_weights: Mapping[str, float], primary, other=None,
                weights_source: str = "shapes.yaml weights") -> SuiteScore:
    """Combine per-operator verdicts into the suite's score. Pure apart from reading operator specs."""
    missing = [op for op in results if op not in raw_weights]
    if missing:
        raise SuiteError(f"no weight for operator(s) {', '.join(missing)} in {weights_source}; "
                         f"re-make the weights file, or drop --weights")
    w = normalize({op: raw_weights[op] for op in results})
    rows = []
    for op, result in results.items():
        s_i, s_other = operator_s_i(result, other)
        rows.append(OperatorScore(op, choices[op].label, w[op], s_i, s_other, result.verdict, result.failed_stage,
                                  tuple(result.reasons), failed_shapes(result), result))
    interpreter = any(r.result.interpreter for r in rows)

    def agg(key: str) -> float | None:
        values = {r.op: getattr(r, key) for r in rows}
        if not values or any(v is None for v in values.values()):
            return None
        return aggregate(values, w)

    return SuiteScore(shape_set, f"{primary.name} {primary.source}",
                      f"{other.name} {other.source}" if other is not None else None, interpreter, tuple(rows),
                      agg("s_i"), agg("s_i_other") if other is not None else None, weights_source)
