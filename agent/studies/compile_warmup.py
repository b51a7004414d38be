"""Fill torch.compile's on-disk caches for the (operator, shape) pairs a study is about to time, in parallel.

A study that times torch.compile the way serving engines use it compiles one static graph per shape
(torch._dynamo.reset(), dynamic=False); most of its wall time is Inductor's code generation and the Triton
compiles of the generated kernels, which use the CPU, not the GPU. This runs those compiles in N processes at
once first; the study's own compile of the same graph (same function, same input shapes, strides and dtypes)
then loads from Inductor's FX graph cache and Triton's kernel cache. The timing itself stays sequential in
one process: the warm-up only moves compile time, never measures anything.

    python -m agent.studies.compile_warmup --ops softmax,l2_norm --max-shapes 3 --jobs 8
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time


def pairs(ops: list[str], max_shapes: int, pick) -> list[tuple[str, str]]:
    """(operator, shape id) of every shape the study will time, in the study's order."""
    from benchmarks.registry import load_operator
    return [(op, s.id) for op in ops for s in pick(load_operator(op).shapes, max_shapes)]


def compile_one(op: str, shape_id: str) -> None:
    """One static compile of the operator's baseline at one shape, called once on the GPU."""
    import torch
    from benchmarks.registry import load_operator
    spec = load_operator(op)
    shape = next(s for s in spec.shapes if s.id == shape_id)
    baseline = getattr(spec.module, "baseline", spec.reference)
    inputs = spec.make_inputs(shape.dim, shape.dtype, seed=1000, device="cuda")
    torch._dynamo.reset()
    torch.compile(baseline, dynamic=False)(**inputs)
    torch.cuda.synchronize()


def warm(ops: list[str], max_shapes: int, jobs: int, pick) -> list[str]:
    """Compile every pair in up to `jobs` child processes; returns one line per pair that failed (the study
    then compiles that pair itself and reports its own error)."""
    todo = pairs(ops, max_shapes, pick)
    running: list[tuple[tuple[str, str], subprocess.Popen]] = []
    failed = []
    while todo or running:
        while todo and len(running) < max(1, jobs):
            op, sid = todo.pop(0)
            cmd = [sys.executable, "-m", "agent.studies.compile_warmup", "--one", op, sid]
            running.append(((op, sid), subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
        time.sleep(0.2)
        for item in list(running):
            (op, sid), proc = item
            if proc.poll() is None:
                continue
            running.remove(item)
            if proc.returncode:
                tail = (proc.stderr.read() or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
                failed.append(f"{op} {sid}: exit {proc.returncode}: {tail[0][:200]}")
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", default="")
    ap.add_argument("--max-shapes", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--one", nargs=2, metavar=("OP", "SHAPE_ID"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        compile_one(*args.one)
        return 0
    from agent.studies.measure_new_ops import pick_shapes
    t0 = time.monotonic()
    failed = warm([o for o in args.ops.split(",") if o], args.max_shapes, args.jobs, pick_shapes)
    print(f"compile warm-up: {time.monotonic() - t0:.0f} s, {len(failed)} failed" + "".join(f"\n  {f}" for f in failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
