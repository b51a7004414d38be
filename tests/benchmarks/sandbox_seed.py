"""Test helper: an operator's seed through the real sandbox (lint, compile, correctness with hold-outs) under
the interpreter, on the operator's smallest hot shapes (scaled down by the sandbox itself)."""
from pathlib import Path

from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from sandbox.evaluation import EvalRequest, evaluate
from sandbox.settings import SandboxSettings


def evaluate_seed(op: str, n_shapes: int = 2, trials: int = 1):
    spec = load_operator(op)
    shapes = sorted(spec.select("hot"), key=lambda s: sum(s.dim.values()))[:n_shapes]
    req = EvalRequest(op=op, source=Path(spec.seed_path).read_text(), shapes=tuple(shapes),
                      hardware=load_hardware("h200"), settings=SandboxSettings(trials=trials),
                      timing=False, interpreter=True)
    return evaluate(req)
