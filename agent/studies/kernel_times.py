"""Per-launch device times of a seed call: which of its kernels the time goes to, per shape and variant.

    python -m agent.studies.kernel_times --op top_k_top_p_filter [--shapes ID,...] [--variants NAME,...]
        [--calls 20] [--out DIR]

Each (shape, variant) runs the seed on the operator's own inputs (seed 0) `calls` times under torch.profiler
(CUDA activity only) after two warm-up calls; the table gives every kernel's mean device time per call, in
launch order, and their sum. L2 is not flushed and launches are back to back, so the sum sits below the
score's timer (graph replay, cold L2): this says where the time goes, not what the call costs. With PDL on
(programmatic dependent launch) a kernel starts before the one ahead of it ends and its time includes that wait:
time a variant with PDL off to split the time between kernels.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _kernel_means(fn, inputs: dict, calls: int) -> list[tuple[str, float, int]]:
    """(kernel name, mean device us per call, launches per call) in first-launch order."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(2):
        fn(**inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(**inputs)
        torch.cuda.synchronize()
    order: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA" and ev.device_time_total > 0:
            order.setdefault(ev.name, []).append(ev.device_time_total)
    return [(name, sum(t) / calls, round(len(t) / calls)) for name, t in order.items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", required=True)
    ap.add_argument("--shapes", default="", help="shape ids (default: the hot shapes)")
    ap.add_argument("--variants", default="",
                    help="seed variant names (agent/studies/seed_variants.py), timed after the seed")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    from benchmarks.registry import UnknownOperator, load_operator
    try:
        spec = load_operator(args.op)
    except UnknownOperator as e:        # the registry's message names the op and every known one
        print(f"kernel_times: {e}; pass one of them to --op", file=sys.stderr)
        return 2
    import torch
    from agent.studies import seed_variants as sv
    wanted = [s for s in args.shapes.split(",") if s]
    shapes = [s for s in spec.shapes if (s.id in wanted if wanted else s.hot)]
    missing = sorted(set(wanted) - {s.id for s in shapes})
    named = dict(sv.VARIANTS.get(args.op, []))
    unknown = [v for v in args.variants.split(",") if v and v not in named]
    if missing or unknown:
        print(f"unknown shape ids {missing} or variants {unknown} for {args.op} (variants: {', '.join(named)})")
        return 2
    if not torch.cuda.is_available():
        print("kernel_times needs a CUDA GPU (the profiler times device kernels)")
        return 2
    module = sv.load_seed(spec)
    fns = {"seed": getattr(module, args.op)}
    fns.update({v: sv.seed_variant(module, named[v]) for v in args.variants.split(",") if v})
    rows, lines = [], [f"# {args.op}: device time per kernel (us per call, {args.calls} calls, warm L2)", "",
                       f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}", ""]
    for shape in shapes:
        inputs = spec.make_inputs(shape.dim, shape.dtype, seed=0, device="cuda")
        for name, fn in fns.items():
            kernels = _kernel_means(fn, inputs, args.calls)
            total = sum(t for _, t, _ in kernels)
            rows.append({"shape": shape.id, "variant": name, "total_us": total,
                         "kernels": [{"name": k, "us": t, "launches": n} for k, t, n in kernels]})
            parts = ", ".join(f"{k[:40]} {t:.1f}" + (f" (x{n})" if n > 1 else "") for k, t, n in kernels)
            lines.append(f"- {shape.id} {name}: {total:.1f} us = {parts}")
            print(lines[-1], flush=True)
            if args.out:                          # after every row: a lost machine keeps what was timed
                out = Path(args.out)
                out.mkdir(parents=True, exist_ok=True)
                (out / "kernel_times.json").write_text(json.dumps(rows, indent=1))
                (out / "kernel_times.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
