"""Which tunables the scored shapes use, read from the launch record of an EvalResult.

The worker records, per visible shape, the CONFIGS leaves the launcher read to pick its kernels
(sandbox/launch_record.py: ["by_block_h", 1024, "ROWS"]). From those rows this module gives the
search proposer (agent/proposers/search.py), per CONFIGS path:
- the weight of the shapes that read it (a bucket no scored shape reaches has weight 0 and is not
  moved: on rms_norm's hot set 3 of its 6 buckets are never read at GPU sizes);
- the roofline regime of those shapes (a decode bucket is memory-bound even when the set's weighted
  majority is compute-bound), so moves are pruned per bucket, not for the whole kernel;
- the ids of those shapes, for the proposal's `why`.
When a visible row carries no traced record (an older result, a launcher that copied CONFIGS at
import, a baseline), the usage is unknown and every tunable stays movable, as before the record existed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REGIME_SHARE = 2 / 3          # weight share of one bound that makes a regime (as for the whole kernel)


@dataclass(frozen=True)
class Usage:
    known: bool = False                                   # every visible row had a traced record
    weight: dict[tuple, float] = field(default_factory=dict)        # path -> summed shape weight
    bound_weight: dict[tuple, dict[str, float]] = field(default_factory=dict)   # path -> bound -> weight
    shapes: dict[tuple, tuple[str, ...]] = field(default_factory=dict)          # path -> shape ids
    shape_weight: dict[str, float] = field(default_factory=dict)                # shape id -> weight

    def uses(self, path: tuple) -> bool:
        return not self.known or tuple(path) in self.shapes

    def weight_of(self, path: tuple) -> float:
        return self.weight.get(tuple(path), 0.0)

    def regime(self, path: tuple) -> str | None:
        """memory | compute | mixed for the shapes reading `path`; None when unknown."""
        by = self.bound_weight.get(tuple(path))
        if not by:
            return None
        total = by.get("memory", 0.0) + by.get("compute", 0.0)
        if total <= 0:
            return None
        return ("memory" if by.get("memory", 0.0) >= REGIME_SHARE * total else
                "compute" if by.get("compute", 0.0) >= REGIME_SHARE * total else "mixed")

    def shapes_of_all(self, paths: list[tuple]) -> tuple[str, ...]:
        """The shapes that read any of `paths`, each once, in first-seen order."""
        ids: dict[str, None] = {}
        for path in paths:
            ids.update(dict.fromkeys(self.shapes.get(tuple(path), ())))
        return tuple(ids)

    def weight_of_all(self, paths: list[tuple]) -> float:
        """The weight of the shapes that read any of `paths` (a tied group), each shape counted once."""
        if len(paths) == 1:
            return self.weight_of(paths[0])
        return sum(self.shape_weight.get(i, 0.0) for i in self.shapes_of_all(paths))

    def describe(self, path: tuple, limit: int = 3) -> str:
        return self.describe_all([path], limit)

    def describe_all(self, paths: list[tuple], limit: int = 3) -> str:
        ids = self.shapes_of_all(paths)
        if not self.known or not ids:
            return ""
        more = f" +{len(ids) - limit}" if len(ids) > limit else ""
        return f"used by {', '.join(ids[:limit])}{more} (weight {self.weight_of_all(paths):.3g})"


def read_usage(result: dict[str, Any] | None) -> Usage:
    """Usage from an EvalResult.to_json() a proposer may see (hold-out rows are skipped if present)."""
    rows = [r for r in (result or {}).get("shapes") or [] if not r.get("holdout")]
    if not rows:
        return Usage()
    weight: dict[tuple, float] = {}
    bounds: dict[tuple, dict[str, float]] = {}
    shapes: dict[tuple, list[str]] = {}
    shape_weight: dict[str, float] = {}
    for row in rows:
        reads = (row.get("launches") or {}).get("configs_read")
        if not reads:      # None (untraced) or empty (CONFIGS read before the call): usage unknown
            return Usage()
        w = float(row.get("weight") or 0.0)
        shape_weight[str(row.get("id", "?"))] = w
        for path in {tuple(p) for p in reads}:
            weight[path] = weight.get(path, 0.0) + w
            if row.get("bound"):
                by = bounds.setdefault(path, {})
                by[row["bound"]] = by.get(row["bound"], 0.0) + w
            shapes.setdefault(path, []).append(str(row.get("id", "?")))
    return Usage(True, weight, bounds, {p: tuple(v) for p, v in shapes.items()}, shape_weight)
