"""The program Nsight Compute profiles: `python -m sandbox.ncu_target --op OP --candidate PATH --dims JSON --dtype DT`.

It loads the candidate file, builds the operator's inputs, warms up (JIT compilation, autotuning), then
brackets `--calls` calls with cudaProfilerStart/Stop; ncu runs with `--profile-from-start off`, so only
those calls are profiled (see sandbox/counters.py for why not --launch-skip). It prints nothing on
stdout: ncu's CSV is the only result.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path


def load_candidate(path: str, op: str):
    """The candidate's function named after the operator, from its file."""
    file = Path(path).resolve()
    if not file.is_file():
        raise FileNotFoundError(f"candidate file {file} does not exist")
    name = f"aka_candidate_{op}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # Triton reads kernel sources through the module
    spec.loader.exec_module(module)
    fn = getattr(module, op, None)
    if not callable(fn):
        raise AttributeError(f"{file} defines no function {op}(...); a candidate defines one named after the operator")
    return fn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sandbox.ncu_target", description=__doc__.splitlines()[0])
    ap.add_argument("--op", required=True)
    ap.add_argument("--candidate", required=True)
    ap.add_argument("--dims", required=True, help='JSON object, e.g. \'{"T": 1, "H": 4096}\'')
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch
    from benchmarks.registry import load_operator

    dims = json.loads(args.dims)
    inputs = load_operator(args.op).make_inputs(dims, args.dtype, args.seed, "cuda")
    fn = load_candidate(args.candidate, args.op)
    for _ in range(args.warmup):
        fn(**inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(args.calls):
        fn(**inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
