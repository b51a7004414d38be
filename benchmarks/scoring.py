"""Attainment per shape, S_i per operator, S_agg over operators. Pure functions, CPU-only.

a_s   = min(1, T_ref(s) / T(s)),  T_ref(s) = max(T_roof(s), T_floor)
S_i   = median over the operator's shapes of a_s (a failed shape counts 0)
S_agg = sum_i w_i * S_i, w_i = operator i's share of the shape set's weight (sum w_i = 1)
The agent climbs the weight-averaged a_s instead: a median is robust for reporting
but blind to gains away from the median shape.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence


class EmptyShapeSet(ValueError):
    pass


@dataclass(frozen=True)
class ShapeScore:
    id: str
    weight: float
    t_s: float | None          # measured time of one call; None when the shape failed
    t_roof_s: float
    t_floor_s: float
    attainment: float          # in [0, 1]; 0 when failed
    raw_ratio: float | None    # T_ref / T before the cap; > 1 means suspect
    suspect: bool              # T beat the reference time: re-measure, never reward

    @property
    def failed(self) -> bool:
        return self.t_s is None


def t_ref(t_roof_s: float, t_floor_s: float) -> float:
    return max(t_roof_s, t_floor_s)


def score_shape(id: str, weight: float, t_s: float | None, t_roof_s: float, t_floor_s: float) -> ShapeScore:
    if t_s is None:
        return ShapeScore(id, weight, None, t_roof_s, t_floor_s, 0.0, None, False)
    if not t_s > 0:
        raise ValueError(f"shape {id}: measured time {t_s!r} s is not positive; a timer that reads 0 is broken")
    ratio = t_ref(t_roof_s, t_floor_s) / t_s
    return ShapeScore(id, weight, t_s, t_roof_s, t_floor_s, min(1.0, ratio), ratio, ratio > 1.0)


def operator_score(scores: Sequence[ShapeScore]) -> float:
    """S_i: the median attainment over the shapes (failed shapes count 0)."""
    if not scores:
        raise EmptyShapeSet("S_i of an empty shape set is undefined: the operator has no shapes in this set; "
                            "pick another --shape-set (hot, all, prefill, decode)")
    return float(statistics.median(s.attainment for s in scores))


def weighted_attainment(scores: Sequence[ShapeScore]) -> float:
    """The number the agent climbs: sum(w_s a_s) / sum(w_s); equal weights if all are 0."""
    if not scores:
        raise EmptyShapeSet("weighted attainment of an empty shape set is undefined")
    total = sum(s.weight for s in scores)
    if total <= 0:
        return sum(s.attainment for s in scores) / len(scores)
    return sum(s.weight * s.attainment for s in scores) / total


def normalize(weights: Mapping[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    if total <= 0:
        n = len(weights)
        return {k: 1.0 / n for k in weights} if n else {}
    return {k: v / total for k, v in weights.items()}


def aggregate(op_scores: Mapping[str, float], op_weights: Mapping[str, float]) -> float:
    """S_agg = sum_i w_i S_i with w normalized over the operators scored."""
    missing = set(op_scores) - set(op_weights)
    if missing:
        raise KeyError(f"no weight for operators {sorted(missing)}")
    if not op_scores:
        raise EmptyShapeSet("S_agg over no operators is undefined")
    w = normalize({k: op_weights[k] for k in op_scores})
    return sum(w[k] * op_scores[k] for k in op_scores)


def operator_weight(shape_weights: Iterable[float]) -> float:
    """w_i before normalization: the sum of the operator's shape weights in the set."""
    return float(sum(shape_weights))
