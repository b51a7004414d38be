"""The red-team and honest candidate corpora (tests/sandbox/{redteam,honest}): their header format.

Header lines (comments at the top of each file):
  # expect: reject | accept          # stage: one of lint|compile|correctness|dsl|timing (rejects);
                                     #   "correctness|lint" accepts either gate (a form the lint may learn)
  # op: rms_norm                     # needs: cpu (decidable under the interpreter) | gpu
  # why: <reason>                    # cause: <text the reason must contain; alternatives with |> (optional)
  # dims: T=1 H=128 | T=4 H=256      (optional visible shapes)   # timeout_s: 40 (optional)
Used by the corpus test and by sandbox/studies/sandbox_h200.py, which runs both corpora on a GPU.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

from benchmarks.spec import Shape

_HEADER = re.compile(r"^#\s*([a-z_]+):\s*(.*?)\s*$")


def corpus_files(root: Path) -> list[Path]:
    """Every corpus file under root/redteam and root/honest, red-team first."""
    return sorted((root / "redteam").glob("*.py")) + sorted((root / "honest").glob("*.py"))


def parse_header(text: str) -> dict[str, str]:
    """The `# key: value` lines before the first line of code (continuation comment lines are skipped)."""
    head: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        m = _HEADER.match(line)
        if m and m.group(1) not in head:
            head[m.group(1)] = m.group(2)
    return head


def parse_dims(text: str) -> list[dict[str, int]]:
    """"T=1 H=128 | T=4 H=256" -> [{"T": 1, "H": 128}, {"T": 4, "H": 256}]."""
    return [{k: int(v) for k, v in (kv.split("=") for kv in part.split())} for part in text.split("|")]


def _numel(dims: dict[str, int]) -> int:
    n = 1
    for v in dims.values():
        n *= v
    return n


def visible_shapes(spec, head: dict[str, str]) -> tuple[Shape, ...]:
    """Two small shapes: from the file's `dims`, else the operator's smallest hot shapes (the interpreter
    scales them down itself), else its hold-out generator when shapes.yaml is not there yet."""
    dtype = "bf16"
    if "dims" in head:
        dims = parse_dims(head["dims"])
    elif spec.shapes:
        hot = sorted(spec.select("hot") or spec.shapes, key=lambda s: _numel(s.dim))
        dims, dtype = [s.dim for s in hot[:2]], hot[0].dtype
    else:
        dims = sorted(spec.holdout_dims(random.Random(0)), key=_numel)[:2]
    return tuple(Shape.make(f"s{i}", d, dtype=dtype, weight=1.0) for i, d in enumerate(dims))
