"""`--weights FILE`: the weights file of `aka weights --from-trace`, read the same way by every command that
weighs operators (w_i of S_agg: aka bench --all, aka nightly's summary) or shapes (the weight-averaged
attainment that aka optimize climbs and aka bench, aka report and aka nightly report).

    file = load_weights_file(path)                    # checks: operators known, a positive total
    w_i = file.operator_weights("hot", ops)           # summed over the set's phases; unmapped time left out
    shapes = file.reweigh("rms_norm", shapes)         # each shape's weight: the traced time of its dims

A file entry is (op, shape, dims, phase, weight). An entry weighs a shape when its dims equal the shape's
(and its phase too, where two shapes share dims). Entries without dims (a kernel the map names without a
shape) count towards their operator's w_i only. Errors say the file, the value and the fix:
- an operator aka does not know (other than "unmapped"): the map names it, or the file was edited;
- no positive total over aka's operators;
- when shapes are weighed: an entry whose dims are none of the operator's shapes (the traced model runs a
  shape the benchmark lacks: add it to the operator's shapes.yaml, or weigh without the file), or a shape
  set the file gives no weight at all.
An operator the file has no shaped entries for keeps its shapes.yaml weights, and `note(op)` says so.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from benchmarks.spec import Shape
from benchmarks.weights_trace import UNMAPPED, Weights, WeightsFileError, load_weights


@dataclass(frozen=True)
class WeightsFile:
    path: str
    weights: Weights

    def operator_weights(self, shape_set: str, ops: Iterable[str] = ()) -> dict[str, float]:
        """w_i before normalization, for the phases of `shape_set` (benchmarks.weights_trace)."""
        return self.weights.operator_weights(shape_set, ops)

    def _shaped(self, op: str) -> list[dict]:
        return [e for e in self.weights.entries if e["op"] == op and e.get("dims")]

    def note(self, op: str) -> str | None:
        if self._shaped(op):
            return None
        return f"weights file {self.path} has no shape entries for {op}: its shapes.yaml weights are kept"

    def reweigh(self, op: str, shapes: Sequence[Shape], known: Sequence[Shape] | None = None) -> tuple[Shape, ...]:
        """`shapes` with the file's weights (their sum is the traced share of those shapes; scores normalize).
        `known`: every shape of the operator the entries may name (default: `shapes`)."""
        entries = self._shaped(op)
        if not entries:
            return tuple(shapes)
        known = list(known if known is not None else shapes)
        weight: dict[str, float] = {}
        unknown = []
        for e in entries:
            match = _matching(e, known)
            if not match:
                unknown.append(f"{e.get('shape')} ({e.get('phase')}, weight {e['weight']:.3g})")
            for s in match:
                weight[s.id] = weight.get(s.id, 0.0) + float(e["weight"]) / len(match)
        if unknown:
            raise WeightsFileError(
                f"weights file {self.path}: {op} entries with dims that are none of its {len(known)} shapes: "
                f"{', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}; add them to "
                f"benchmarks/operators/{op}/shapes.yaml (aka shapes --op {op} lists the shapes), or drop --weights")
        out = tuple(dataclasses.replace(s, weight=weight.get(s.id, 0.0)) for s in shapes)
        if sum(s.weight for s in out) <= 0:
            raise WeightsFileError(
                f"weights file {self.path} gives {op}'s {len(out)} chosen shape(s) ({', '.join(s.id for s in out)}) "
                f"no weight: its {op} entries weigh other shapes or phases; choose the shape set the traces cover "
                f"(aka shapes --op {op}), or drop --weights")
        return out


def _matching(entry: dict, shapes: Sequence[Shape]) -> list[Shape]:
    dims = {str(k): int(v) for k, v in dict(entry["dims"]).items()}
    same = [s for s in shapes if s.dim == dims]
    phased = [s for s in same if s.phase == entry.get("phase")]
    return phased or same


def load_weights_file(path: str | Path, operators: Iterable[str] | None = None) -> WeightsFile:
    """Read and check a weights file. `operators`: the names aka knows (default: the registry's)."""
    if operators is None:
        from benchmarks.registry import list_operators
        operators = list_operators()
    known = set(operators)
    try:
        w = load_weights(Path(path))
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, WeightsFileError):
            raise
        raise WeightsFileError(f"weights file {path}: malformed ({type(e).__name__}: {e}); write it again with "
                               f"`aka weights --from-trace`")
    bad = [e for e in w.entries if not (isinstance(e, dict) and {"op", "weight"} <= set(e)
                                        and isinstance(e["weight"], (int, float)) and math.isfinite(e["weight"])
                                        and e["weight"] >= 0)]
    if bad:
        raise WeightsFileError(f"weights file {path}: {len(bad)} entries lack an op or a finite weight >= 0, e.g. "
                               f"{str(bad[0])[:200]}; write it again with `aka weights --from-trace`")
    unknown = sorted({e["op"] for e in w.entries} - known - {UNMAPPED})
    if unknown:
        raise WeightsFileError(f"weights file {path} names operator(s) aka does not know: {', '.join(unknown)} "
                               f"(known: {', '.join(sorted(known))}); fix the rules of the kernel map "
                               f"(configs/kernel_map.yaml) and run `aka weights --from-trace` again")
    total = sum(float(e["weight"]) for e in w.entries if e["op"] != UNMAPPED)
    if not total > 0:
        raise WeightsFileError(f"weights file {path}: the weights of aka's operators sum to {total:g}, not a "
                               f"positive total (all traced time unmapped?); add kernel map rules for the "
                               f"kernels `aka weights` lists as unmapped")
    return WeightsFile(str(path), w)


def reweighted_score(per_shape: Mapping[str, float], weights: Mapping[str, float]) -> float | None:
    """The weight-averaged attainment of recorded per-shape attainments under other shape weights (a shape
    without one failed: it counts 0). None without attainments (an untimed run) or without weight."""
    total = sum(weights.values())
    if not per_shape or total <= 0:
        return None
    return sum(w * float(per_shape.get(s, 0.0)) for s, w in weights.items()) / total
