"""A small additive model of a kernel's score over its tunables, fit on the configs the search measured.

Why. Coordinate descent changes one slot a step; when the best config differs from the start in four
or five slots, it needs as many accepted steps, each after a full neighbourhood of trials. Tile sizes,
warps and stages act mostly independently on a kernel's time, so an additive model fit on a few
measurements already says which value of each slot tends to score higher, and points at configs that
change several slots at once. The search ranks its moves with it (agent/proposers/search.py).

The model. One-hot features, one per (slot, value), plus one per pair of (slot, value)s when there are
at most 12 slots (shrunk 4x harder: an interaction needs more evidence than a main effect); ridge
regression on the scores minus their mean, so a value never measured has effect 0 (the mean).
Ranking uses an optimistic bound: the prediction plus `explore` x the scores' standard deviation
(floored at 2% of their mean) x the sum over slots of 1/sqrt(1 + n), n the number of measured configs
with that slot's value, so a value seen rarely still gets tried. Pure and deterministic; numpy only.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from agent.proposers.search_space import Slot, get_at

RIDGE = 0.3        # shrinks effects measured once towards 0, relative to the scores' variance
EXPLORE = 0.3
MAX_PAIR_SLOTS = 12   # more tunables than this: main effects only
PAIR_RIDGE = 4.0   # pairwise effects need more evidence than main effects before they move a prediction
SPREAD_FLOOR = 0.02   # of the mean score: the least spread the exploration bonus assumes
MIN_POINTS = 3     # fewer measurements than this: no model, the search keeps its seeded order


class AdditiveModel:
    def __init__(self, slots: Sequence[Slot], ridge: float = RIDGE, explore: float = EXPLORE):
        self.slots = list(slots)
        self.ridge, self.explore = ridge, explore
        self.columns: dict[tuple, int] = {}       # (slot, value) or (slot, value, slot, value) -> column
        for i, slot in enumerate(self.slots):
            for v in slot.rule.grid(slot.value):
                self.columns[(i, v)] = len(self.columns)
        self.mains = len(self.columns)
        # pairwise columns: (i, v, j, w) for i < j, shrunk harder (PAIR_RIDGE) than the main effects; a
        # kernel with many tunables (size buckets) gets main effects only: pairs would grow as slots^2
        self.pairs = len(self.slots) <= MAX_PAIR_SLOTS
        for i, a in enumerate(self.slots if self.pairs else []):
            for j in range(i + 1, len(self.slots)):
                for v in a.rule.grid(a.value):
                    for w in self.slots[j].rule.grid(self.slots[j].value):
                        self.columns[(i, v, j, w)] = len(self.columns)
        self.points: list[tuple[Any, float]] = []
        self._fit: tuple[np.ndarray, float, float, dict[tuple[int, Any], int]] | None = None

    def add(self, config: Any, score: float) -> None:
        if score is None or not math.isfinite(score):
            return
        self.points.append((config, float(score)))
        self._fit = None

    @property
    def ready(self) -> bool:
        return len(self.points) >= MIN_POINTS and len({s for _, s in self.points}) > 1

    def _row(self, config: Any) -> list[int]:
        values = [get_at(config, slot.path) for slot in self.slots]
        keys: list[tuple] = [(i, v) for i, v in enumerate(values)]
        if self.pairs:
            keys += [(i, values[i], j, values[j]) for i in range(len(values)) for j in range(i + 1, len(values))]
        return [c for k in keys if (c := self.columns.get(k)) is not None]

    def _fitted(self):
        if self._fit is None:
            y = np.array([s for _, s in self.points])
            # the spread floor keeps exploring when many near-equal scores shrink the measured spread
            mean, std = float(y.mean()), max(float(y.std()), SPREAD_FLOOR * abs(float(y.mean())))
            x = np.zeros((len(self.points), len(self.columns)))
            counts: dict[tuple[int, Any], int] = {}
            for r, (config, _) in enumerate(self.points):
                x[r, self._row(config)] = 1.0
                for i, slot in enumerate(self.slots):
                    key = (i, get_at(config, slot.path))
                    counts[key] = counts.get(key, 0) + 1
            penalty = np.full(len(self.columns), self.ridge * PAIR_RIDGE)
            penalty[: self.mains] = self.ridge
            # ridge in its dual form, (X D^-1 X^T + I) a = y, beta = D^-1 X^T a: a solve the size of the
            # measured points, however many columns the tunables make
            scaled = x / penalty
            alpha = np.linalg.solve(scaled @ x.T + np.eye(len(self.points)), y - mean)
            beta = scaled.T @ alpha
            self._fit = (beta, mean, std, counts)
        return self._fit

    def predict(self, config: Any) -> float:
        beta, mean, _, _ = self._fitted()
        return mean + float(sum(beta[c] for c in self._row(config)))

    def optimistic(self, config: Any) -> float:
        """predict + an exploration bonus for slot values measured rarely."""
        _, _, std, counts = self._fitted()
        bonus = sum(1.0 / math.sqrt(1 + counts.get((i, get_at(config, s.path)), 0)) for i, s in enumerate(self.slots))
        return self.predict(config) + self.explore * std * bonus

    def effects(self) -> dict[str, dict[Any, float]]:
        """Per slot label, the fitted effect of each value (for the proposal's `why`)."""
        beta, _, _, _ = self._fitted()
        out: dict[str, dict[Any, float]] = {}
        for key, c in self.columns.items():
            if len(key) == 2:
                out.setdefault(self.slots[key[0]].label(), {})[key[1]] = float(beta[c])
        return out
