"""Where the wall time of an evaluation goes: each operator's seed on a shape set, N evaluations in one run's
sandbox (pre-started workers and compile cache as `aka optimize` has them), the per-stage breakdown of each.

    python3 sandbox/studies/eval_breakdown.py --out OUT [--ops rms_norm,gemm] [-n 3] [--slow] [--ab]

--slow turns the speed-ups of issue 9 off (no pre-started worker, the shared default Triton cache, the compile
gate in a child process, 3 trials per hold-out shape): the "before" column. --ab also times one A/B
re-measure of the seed against itself in one worker (the acceptance path). Writes OUT/breakdown.md and
OUT/breakdown.json; prints the short table last. A driver of the sandbox: imports benchmarks and sandbox only.
--per-shape also records, for each shape checked (hidden hold-outs too: this is a study, nothing here reaches a
proposer), its dims, its wall time and its sub-stage seconds (`holdouts/worker.call_first`, ...).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sandbox.stage_times import ordered  # noqa: E402 - after the path insert; imports no torch

OPS = ("rms_norm", "silu_and_mul", "gemm", "fused_moe")
TARGET_S = {"rms_norm": 8.0, "silu_and_mul": 8.0, "gemm": 12.0, "fused_moe": 20.0}   # issue 9, per evaluation


def settings_for(slow: bool, compile_ahead: bool = True):
    from sandbox.settings import SandboxSettings
    if slow:
        return SandboxSettings(prestart=False, compile_cache=False, compile_in_worker=False, holdout_trials=3,
                               compile_ahead=False)
    return SandboxSettings(compile_ahead=compile_ahead)


def record_per_shape(sink: list) -> None:
    """Wrap the evaluation's per-shape check (in this process: the parent's side) to log each shape's seconds."""
    from sandbox.evaluation import _Evaluation
    inner = _Evaluation._check_shape

    def timed(self, w, index, shape, row, *args, **kwargs):
        before, t0 = dict(self.clock.freeze()), time.monotonic()
        try:
            return inner(self, w, index, shape, row, *args, **kwargs)
        finally:
            after = dict(self.clock.freeze())
            sink.append({"op": self.op, "shape": shape.id, "dims": dict(self._dims(shape)), "holdout": self.in_holdout,
                         "purpose": kwargs.get("purpose", args[0] if args else "check"),
                         "wall_s": round(time.monotonic() - t0, 4),
                         "parts_s": {k: round(v - before.get(k, 0.0), 4) for k, v in after.items()
                                     if v - before.get(k, 0.0) > 1e-4}})
    _Evaluation._check_shape = timed


def summarize(runs: list[dict]) -> dict:
    """Cold = the first evaluation of the run; warm = the median over the later ones (pure)."""
    cold = runs[0]
    warm = runs[1:] or runs
    stages: dict[str, list[float]] = {}
    for r in warm:
        for k, v in r["stage_times"]:
            stages.setdefault(k, []).append(v)
    return {"cold_wall_s": cold["wall_s"], "warm_wall_s": statistics.median(r["wall_s"] for r in warm),
            "warm_stages_s": {k: statistics.median(v + [0.0] * (len(warm) - len(v))) for k, v in stages.items()},
            "verdicts": [r["verdict"] for r in runs]}


def markdown(report: dict) -> str:
    lines = [f"# Evaluation wall time by stage ({report['mode']})", "",
             f"Command: `{report['command']}`; {report['n']} evaluations per operator of its seed on the "
             f"`{report['shape_set']}` set in one run's sandbox. Cold: the first (empty compile cache, no spare "
             f"worker yet); warm: median of the rest. Machine: {report['gpu']}.", "",
             "| op | cold s | warm s | target s | verdicts | A/B in one worker s |", "|---|---|---|---|---|---|"]
    for op, s in report["ops"].items():
        ab = s.get("ab_wall_s")
        lines.append(f"| {op} | {s['cold_wall_s']:.1f} | {s['warm_wall_s']:.1f} | {TARGET_S.get(op, '-')} | "
                     f"{', '.join(s['verdicts'])} | {'-' if ab is None else f'{ab:.1f}'} |")
    for op, s in report["ops"].items():
        lines += ["", f"## {op}: warm stages (median seconds)", "", "| stage | s |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in ordered(s["warm_stages_s"].items())]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--shape-set", default="hot")
    ap.add_argument("-n", type=int, default=3, help="evaluations per operator (>= 2: one cold, the rest warm)")
    ap.add_argument("--slow", action="store_true", help="speed-ups off: the 'before' measurement")
    ap.add_argument("--ab", action="store_true", help="also time one A/B of the seed against itself")
    ap.add_argument("--no-compile-ahead", action="store_true",
                    help="sandbox.compile_ahead off: specializations compile at their first call, one at a time")
    ap.add_argument("--per-shape", action="store_true", help="also record each checked shape's seconds")
    ap.add_argument("--seeded-candidate", action="store_true",
                    help="also evaluate a new source with the seed's kernels, its cache seeded from the seed's")
    args = ap.parse_args()
    per_shape: list[dict] = []
    if args.per_shape:
        record_per_shape(per_shape)
    import torch
    from benchmarks.hardware import load_hardware
    from benchmarks.registry import load_operator
    from sandbox.evaluation import EvalRequest
    from sandbox.session import Sandbox
    hw = load_hardware("h200")
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"mode": "speed-ups off (--slow)" if args.slow else "speed-ups on", "n": args.n,
              "shape_set": args.shape_set, "command": " ".join(["python3", "sandbox/studies/eval_breakdown.py"]
                                                               + sys.argv[1:]),
              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU (interpreter)",
              "ops": {}, "runs": {}}
    for op in [o for o in args.ops.split(",") if o]:
        spec = load_operator(op)
        source = Path(spec.seed_path).read_text()
        req = EvalRequest(op=op, source=source, shapes=tuple(spec.select(args.shape_set)), hardware=hw)
        runs = []
        with Sandbox(settings_for(args.slow, not args.no_compile_ahead)) as sb:
            for i in range(max(1, args.n)):
                res = sb(req)
                runs.append({"wall_s": res.wall_s, "verdict": res.verdict, "stage_times": list(res.stage_times),
                             "reasons": res.reasons[:2], "environment": {k: res.environment.get(k) for k in
                                                                         ("worker_prestarted", "compile_cache")}})
                print(f"{op} #{i + 1}: {res.verdict} in {res.wall_s:.1f} s", flush=True)
            summary = summarize(runs)
            if args.seeded_candidate:
                # a new source whose kernels are the seed's: its cache starts as a copy of the seed's sealed one,
                # so every specialization the seed compiled should be found there (compile_cache_from's best case)
                other = dataclasses.replace(req, source=source + "\n# the seed's kernels, as a new source\n",
                                            compile_cache_from=source)
                res = sb(other)
                summary["seeded_candidate_wall_s"] = res.wall_s
                env = {k: res.environment.get(k) for k in ("worker_prestarted", "compile_cache")}
                runs.append({"seeded_candidate": True, "wall_s": res.wall_s, "verdict": res.verdict,
                             "stage_times": list(res.stage_times), "reasons": res.reasons[:2], "environment": env})
                print(f"{op} seeded candidate: {res.verdict} in {res.wall_s:.1f} s", flush=True)
            if args.ab and torch.cuda.is_available():
                t0 = time.monotonic()
                series = sb.measure_ab(req, source)
                summary["ab_wall_s"] = time.monotonic() - t0
                summary["ab_error"] = series.error
                runs.append({"ab": series.to_json()})
        report["ops"][op], report["runs"][op] = summary, runs
        if args.per_shape:
            report["per_shape"] = per_shape
        (args.out / "breakdown.json").write_text(json.dumps(report, indent=1))
    (args.out / "breakdown.md").write_text(markdown(report))
    print("\nop            cold s  warm s  target s  A/B s  seeded candidate s")
    for op, s in report["ops"].items():
        ab, seeded = s.get("ab_wall_s"), s.get("seeded_candidate_wall_s")
        print(f"{op:12s}  {s['cold_wall_s']:6.1f}  {s['warm_wall_s']:6.1f}  {TARGET_S.get(op, 0):8.1f}  "
              f"{'-' if ab is None else f'{ab:.1f}':>5}  {'-' if seeded is None else f'{seeded:.1f}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
