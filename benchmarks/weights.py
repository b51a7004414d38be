"""Importance weights: each (operator, shape)'s share of serving GPU time under a stated serving mix.

Formula (configs/serving_mix.yaml holds every number):

    time(op, dims) = sum over models m, phases p, token counts T of
        share_m * share_p * share_T(p) * tp_m * count(op, dims | m, T) * t_est(op, dims)
    weight(op, dims) = time(op, dims) / sum over all operators and dims of time

    share_m            the model's share of forward passes
    share_p, share_T   the phase's share of passes, the token count's share within the phase
    tp_m               GPUs one forward pass occupies (the per-GPU kernel runs on each of them)
    count              calls per forward pass, from the operator folder's occurrences(cfg, tp, T), or
                       occurrences(cfg, tp, T, phase) where the operator declares a `phase` parameter
    t_est              max(T_roof on the mix's hardware profile (datasheet), launch_floor_us)

Weights in shapes.yaml are shares of the whole modelled GPU time ("all" set); scoring renormalizes
them over the chosen shape set so they sum to 1. Users replace the weights by editing the serving mix
and re-running this script, or by editing the `weight` fields of shapes.yaml directly.

    python3 -m benchmarks.weights            # print the table
    python3 -m benchmarks.weights --write    # regenerate benchmarks/operators/*/shapes.yaml
"""
from __future__ import annotations

import argparse
import inspect
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks.hardware import load_hardware
from benchmarks.registry import OPERATORS_DIR, _load_module, list_operators
from benchmarks.roofline import roofline

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@dataclass
class ShapeRow:
    op: str
    dims: dict[str, int]
    phase: str
    time: float
    sources: set[str]
    weight: float = 0.0
    hot: bool = False

    @property
    def id(self) -> str:
        return "-".join(f"{k}{v}" for k, v in self.dims.items())


def _dtype(mix: dict) -> str:
    return mix.get("dtype", "bf16")


def compute(mix: dict, models: dict, operators: list[str]) -> dict[str, list[ShapeRow]]:
    hw = load_hardware(mix.get("hardware", "h200"))
    floor_s = float(mix.get("launch_floor_us", 2.0)) * 1e-6
    dtype = _dtype(mix)
    rows: dict[tuple[str, tuple], ShapeRow] = {}
    for op in operators:
        module = _load_module(op)
        # Operators whose calls differ by phase (sampling runs once per sequence, the decode form of a
        # convolution is another operator) take `phase`; the others are called as (cfg, tp, tokens).
        takes_phase = "phase" in inspect.signature(module.occurrences).parameters
        for model, m in mix["models"].items():
            if model not in models:
                raise KeyError(f"serving mix names model {model!r}, absent from configs/models.yaml")
            tp = int(m.get("tp", 1))
            for phase, p in mix["phases"].items():
                for tokens, t_share in p["tokens"].items():
                    passes = float(m["share"]) * float(p["share"]) * float(t_share)
                    extra = {"phase": phase} if takes_phase else {}
                    for dims, count in module.occurrences(models[model], tp, int(tokens), **extra):
                        W, Q = module.work(dims, dtype)
                        t_est = max(roofline(W, Q, hw).t_roof_s, floor_s)
                        key = (op, tuple(dims.items()))
                        row = rows.setdefault(key, ShapeRow(op, dict(dims), phase, 0.0, set()))
                        row.time += passes * tp * count * t_est
                        row.sources.add(f"{model} (TP{tp})")
    total = sum(r.time for r in rows.values())
    by_op: dict[str, list[ShapeRow]] = defaultdict(list)
    for r in rows.values():
        r.weight = r.time / total if total else 0.0
        by_op[r.op].append(r)
    for op, op_rows in by_op.items():
        op_rows.sort(key=lambda r: -r.weight)
        _mark_hot(op_rows, float(mix.get("hot_coverage", 0.8)), int(mix.get("hot_max", 8)),
                  int(mix.get("hot_min_per_phase", 2)))
    return dict(by_op)


def _mark_hot(rows: list[ShapeRow], coverage: float, max_n: int, min_per_phase: int) -> None:
    """Heaviest first until `coverage` of the operator's weight, then top up each phase."""
    total = sum(r.weight for r in rows)
    acc = 0.0
    for r in rows:
        if acc >= coverage * total or sum(x.hot for x in rows) >= max_n:
            break
        r.hot, acc = True, acc + r.weight
    for phase in ("decode", "prefill"):
        need = min_per_phase - sum(1 for r in rows if r.hot and r.phase == phase)
        for r in rows:
            if need <= 0:
                break
            if not r.hot and r.phase == phase:
                r.hot, need = True, need - 1


def write_shapes(by_op: dict[str, list[ShapeRow]], dtype: str) -> list[Path]:
    written = []
    for op, rows in by_op.items():
        path = OPERATORS_DIR / op / "shapes.yaml"
        data = {"shapes": [{"id": r.id, "dims": r.dims, "dtype": dtype, "phase": r.phase,
                            "source": ", ".join(sorted(r.sources)), "weight": float(f"{r.weight:.6g}"),
                            "hot": r.hot}
                           for r in sorted(rows, key=lambda r: (r.phase != "decode", -r.weight))]}
        header = ("# Generated by `python3 -m benchmarks.weights --write` from configs/serving_mix.yaml and\n"
                  "# configs/models.yaml: weight = share of modelled serving GPU time (see benchmarks/weights.py).\n")
        path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120))
        written.append(path)
    return written


def load_mix(path: Path | None = None) -> tuple[dict, dict]:
    mix = yaml.safe_load((path or CONFIGS / "serving_mix.yaml").read_text())
    models = yaml.safe_load((CONFIGS / "models.yaml").read_text())
    return mix, models


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mix", type=Path, default=None, help="serving mix YAML (default configs/serving_mix.yaml)")
    ap.add_argument("--write", action="store_true", help="rewrite benchmarks/operators/*/shapes.yaml")
    args = ap.parse_args(argv)
    mix, models = load_mix(args.mix)
    by_op = compute(mix, models, list_operators())
    phase_time = defaultdict(float)
    for op, rows in by_op.items():
        print(f"{op}: share {sum(r.weight for r in rows):.3f}, {len(rows)} shapes, {sum(r.hot for r in rows)} hot")
        for r in rows:
            phase_time[r.phase] += r.weight
            print(f"  {'*' if r.hot else ' '} {r.id:40s} {r.phase:8s} {r.weight:.4f}")
    print("GPU-time share by phase: " + ", ".join(f"{k} {v:.2f}" for k, v in phase_time.items()))
    if args.write:
        for p in write_shapes(by_op, _dtype(mix)):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
