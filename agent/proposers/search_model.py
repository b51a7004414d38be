"""A small additive model of a kernel's score over its tunables, fit on the configs the search measured.

Why. Coordinate descent changes one slot a step; when the best config differs from the start in four
or five slots, it needs as many accepted steps, each after a full neighbourhood of trials. Tile sizes,
warps and stages act mostly independently on a kernel's time, so an additive model fit on a few
measurements already says which value of each slot tends to score higher, and points at configs that
change several slots at once. The search ranks its moves with it (agent/proposers/search.py).

The model. One-hot features, one per (slot, value), plus one per pair of (slot, value)s when there are
at most 12 slots (shrunk 4x harder: an interaction needs more evidence than a main effect); ridge
regression on the scores minus their mean, so a value never measured has effect 0 (the mean).
Ordered slots (block sizes, warps, stages: integer grids of three or more values) also get a trend
feature, the value's grid index: one-hot effects cannot extrapolate, so a step up that measured far worse
said nothing about the step down, which stayed at the back of the queue (the H200 fused_moe recovery of
session 11 tried BLOCK_M 128 -> 256, 0.11 against 0.39, and reached 128 -> 64, its largest gain at 1.5x,
13 moves later). The trend says "the other way"; the one-hot columns keep an optimum in the middle of a
grid possible.
Ranking uses an optimistic bound: the prediction plus `explore` x the scores' standard deviation
(floored at 2% of their mean) x the sum over slots of 1/sqrt(1 + n), n the number of measured configs
with that slot's value, so a value seen rarely still gets tried (jumps and restarts); a neighbour move is
ranked by `optimistic_move`, whose bonus weighs each slot it changes by the slot's share of its name, so a
tied group is not favoured for how many leaves it writes. Pure and deterministic; numpy only.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

import numpy as np

from agent.proposers.search_space import Slot, get_at

RIDGE = 0.3        # shrinks effects measured once towards 0, relative to the scores' variance
EXPLORE = 0.3
MAX_PAIR_SLOTS = 12   # more tunables than this: main effects only
PAIR_RIDGE = 4.0   # pairwise effects need more evidence than main effects before they move a prediction
TREND_RIDGE = 0.25  # relative to RIDGE: a trend shares a slot's measured effect with its one-hot columns
SPREAD_FLOOR = 0.02   # of the mean score: the least spread the exploration bonus assumes
MOVE_BONUS = 4.0   # a move that sets every leaf of its name to values never measured (4: best of 1, 2, 4, 8 in recovery_replay)
MIN_POINTS = 3     # fewer measurements than this: no model, the search keeps its seeded order


def name_shares(slots: Sequence[Slot]) -> list[float]:
    """Each slot's share of its name: 1 / the slots with its name and rule (BLOCK_N of two GEMMs in six
    buckets: 1/12 each; BLOCK_M, one a bucket: 1/6). A move's coarseness is the sum over the slots it sets."""
    family = Counter((s.name, s.rule.kind) for s in slots)
    return [1.0 / family[(s.name, s.rule.kind)] for s in slots]


class AdditiveModel:
    def __init__(self, slots: Sequence[Slot], ridge: float = RIDGE, explore: float = EXPLORE, trends: bool = True):
        self.slots = list(slots)
        self.ridge, self.explore = ridge, explore
        self.columns: dict[tuple, int] = {}       # (slot, value) or (slot, value, slot, value) -> column
        for i, slot in enumerate(self.slots):
            for v in slot.rule.grid(slot.value):
                self.columns[(i, v)] = len(self.columns)
        # one trend column per ordered slot, valued by grid index (0 at the literal's own value)
        self.trends: dict[int, tuple[int, tuple]] = {}      # slot -> (column, grid)
        for i, slot in enumerate(self.slots if trends else []):
            grid = slot.rule.grid(slot.value)
            if slot.rule.kind not in ("switch", "declared", "fixed") and len(grid) > 2 and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in grid):
                self.trends[i] = (len(self.columns) + len(self.trends), grid)
        self.mains = len(self.columns) + len(self.trends)
        self.width = self.mains                            # every column (the pairs follow)
        # pairwise columns: (i, v, j, w) for i < j, shrunk harder (PAIR_RIDGE) than the main effects; a
        # kernel with many tunables (size buckets) gets main effects only: pairs would grow as slots^2
        self.pairs = len(self.slots) <= MAX_PAIR_SLOTS
        for i, a in enumerate(self.slots if self.pairs else []):
            for j in range(i + 1, len(self.slots)):
                for v in a.rule.grid(a.value):
                    for w in self.slots[j].rule.grid(self.slots[j].value):
                        self.columns[(i, v, j, w)] = self.width
                        self.width += 1
        self.shares = name_shares(self.slots)
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

    def _row(self, config: Any) -> dict[int, float]:
        """column -> feature: 1 for a one-hot column, the grid index less the literal's for a trend."""
        values = [get_at(config, slot.path) for slot in self.slots]
        keys: list[tuple] = [(i, v) for i, v in enumerate(values)]
        if self.pairs:
            keys += [(i, values[i], j, values[j]) for i in range(len(values)) for j in range(i + 1, len(values))]
        row = {c: 1.0 for k in keys if (c := self.columns.get(k)) is not None}
        for i, (c, grid) in self.trends.items():
            if values[i] in grid:
                row[c] = float(grid.index(values[i]) - grid.index(self.slots[i].value))
        return row

    def _fitted(self):
        if self._fit is None:
            y = np.array([s for _, s in self.points])
            # the spread floor keeps exploring when many near-equal scores shrink the measured spread
            mean, std = float(y.mean()), max(float(y.std()), SPREAD_FLOOR * abs(float(y.mean())))
            x = np.zeros((len(self.points), self.width))
            counts: dict[tuple[int, Any], int] = {}
            for r, (config, _) in enumerate(self.points):
                for c, v in self._row(config).items():
                    x[r, c] = v
                for i, slot in enumerate(self.slots):
                    key = (i, get_at(config, slot.path))
                    counts[key] = counts.get(key, 0) + 1
            penalty = np.full(self.width, self.ridge * PAIR_RIDGE)
            penalty[: self.mains] = self.ridge
            for c, _ in self.trends.values():
                penalty[c] = self.ridge * TREND_RIDGE
            # ridge in its dual form, (X D^-1 X^T + I) a = y, beta = D^-1 X^T a: a solve the size of the
            # measured points, however many columns the tunables make
            scaled = x / penalty
            alpha = np.linalg.solve(scaled @ x.T + np.eye(len(self.points)), y - mean)
            beta = scaled.T @ alpha
            self._fit = (beta, mean, std, counts)
        return self._fit

    def predict(self, config: Any) -> float:
        beta, mean, _, _ = self._fitted()
        return mean + float(sum(beta[c] * v for c, v in self._row(config).items()))

    def optimistic(self, config: Any) -> float:
        """predict + an exploration bonus for slot values measured rarely."""
        _, _, std, counts = self._fitted()
        bonus = sum(1.0 / math.sqrt(1 + counts.get((i, get_at(config, s.path)), 0)) for i, s in enumerate(self.slots))
        return self.predict(config) + self.explore * std * bonus

    def optimistic_move(self, config: Any, base: Any) -> float:
        """A neighbour move's rank: predict + a bonus for the values it sets that were measured rarely, each
        changed slot's 1/sqrt(1 + n) weighted by its family share, times MOVE_BONUS. `optimistic` sums over
        slots, which ranks a move by how many leaves it writes: BLOCK_N tied over two GEMMs in six buckets
        (12 leaves) got twice the bonus of BLOCK_M tied over six buckets for the same kind of step, and on
        the H200 the search reached BLOCK_M, fused_moe's largest gain, last. Shares make both "every leaf of
        the name" (bonus up to MOVE_BONUS) and keep a whole family ahead of one bucket's leaf."""
        _, _, std, counts = self._fitted()
        fresh = sum(self.shares[i] / math.sqrt(1 + counts.get((i, get_at(config, s.path)), 0))
                    for i, s in enumerate(self.slots) if get_at(config, s.path) != get_at(base, s.path))
        return self.predict(config) + self.explore * std * MOVE_BONUS * fresh

    def effects(self) -> dict[str, dict[Any, float]]:
        """Per slot label, the fitted effect of each value (for the proposal's `why`)."""
        beta, _, _, _ = self._fitted()
        out: dict[str, dict[Any, float]] = {}
        for key, c in self.columns.items():
            if len(key) == 2:
                out.setdefault(self.slots[key[0]].label(), {})[key[1]] = float(beta[c])
        return out
