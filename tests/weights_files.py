"""Test helper: a weights file in the format `aka weights --from-trace` writes, with the given entries."""
from __future__ import annotations

import json
from pathlib import Path


def entry(op: str, shape, weight: float) -> dict:
    """An entry that weighs `shape` (a benchmarks.spec.Shape): its dims and phase."""
    return {"op": op, "shape": "-".join(f"{k}{v}" for k, v in shape.dim.items()), "dims": dict(shape.dim),
            "phase": shape.phase, "time_us": 100.0 * weight, "weight": weight}


def write_weights(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps({"kind": "aka-weights", "version": 1, "device": "gpu", "traces": ["t.json"],
                                "total_us": 100.0, "entries": entries, "unmapped_kernels": []}))
    return path
