"""Helpers the per-operator tests share: loading a seed file fresh, and the sandbox's tolerance check."""
import importlib.util
import math

from sandbox.correctness import compare


def load_seed(path, name: str):
    """A fresh instance of a seed module (each test may rewrite its CONFIGS)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tolerance_failures(out, ref, tol) -> list[str]:
    """Why `out` fails the tolerance, by the sandbox's own check (empty when it passes)."""
    stats = compare(out, ref, tol)
    return [] if stats.passed else [stats.describe(tol)]


def assert_within(out, ref, tol, scale=None) -> float:
    """The contract's check (same shape and dtype, every element within atol + rtol*|ref|, or with the
    reference's `scale` (reference_with_scale) atol + rtol*max(|ref|, scale), rel_l2 within its limit,
    nothing non-finite); returns rel_l2."""
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
    stats = compare(out, ref, tol, scale=scale)
    assert stats.passed, stats.describe(tol)
    return stats.rel_l2


def call_failures(spec, fn, inputs: dict, dims: dict, in_dtype: str = "fp32") -> list[str]:
    """Why fn(**inputs) is not the operator's result at `dims`, by the sandbox's own rules for every operator
    form (one output, a tuple of OUTPUTS, MUTATES written in place, the operator's `check`); empty when it
    passes. `inputs` is left as it was: fn runs on clones of the mutated arguments."""
    import torch

    from sandbox import results
    from sandbox.correctness import torch_dtype
    exp = results.expected(spec, inputs, dims, in_dtype, 0, keep_inputs=True)
    args = {k: (v.clone() if k in spec.mutates else v) for k, v in inputs.items()}
    before = {k: v.clone() for k, v in inputs.items() if torch.is_tensor(v) and k not in spec.mutates}
    tensors, problem = results.returned(fn(**args), spec)
    if problem:
        return [problem[1]]
    got = tensors + [args[m] for m in spec.mutates]
    fails = [f"input {k} was modified" for k, v in before.items() if not torch.equal(inputs[k], v)]
    for t, p in zip(got, exp.parts):
        if not torch.is_tensor(t) or tuple(t.shape) != p.shape or t.dtype != torch_dtype(p.dtype):
            fails.append(f"{p.name}: got {getattr(t, 'dtype', type(t))} {tuple(getattr(t, 'shape', ()))}, "
                         f"expected {p.dtype} {p.shape}")
    if fails:
        return fails
    why, _ = results.judge(spec, got, exp, in_dtype)
    return [why] if why else []


def seed_through_sandbox(spec, n_shapes: int = 2):
    """The seed file through the real sandbox under the interpreter (lint, compile, correctness, the read-only
    call, hold-outs; no timing) at the operator's smallest hot shapes: the EvalResult."""
    from pathlib import Path

    from benchmarks.hardware import load_hardware
    from sandbox.evaluation import EvalRequest, evaluate
    from sandbox.settings import SandboxSettings
    hot = sorted(spec.select("hot"), key=lambda s: math.prod(s.dim.values()))[:n_shapes]
    req = EvalRequest(op=spec.name, source=Path(spec.seed_path).read_text(), shapes=tuple(hot),
                      hardware=load_hardware("h200"), settings=SandboxSettings(trials=2, timeout_s=300.0),
                      timing=False, interpreter=True)
    return evaluate(req)


def assert_seed_accepted(spec, gpu: bool = False) -> None:
    """The operator's seed file through every gate of the real sandbox on its hot shapes and hold-outs:
    under the interpreter (scaled-down shapes, no timing), or with gpu=True on CUDA with CUDA-graph timing."""
    from pathlib import Path

    from benchmarks.hardware import load_hardware
    from sandbox.evaluation import EvalRequest, evaluate
    from sandbox.settings import SandboxSettings
    hot = spec.select("hot")
    res = evaluate(EvalRequest(op=spec.name, source=Path(spec.seed_path).read_text(), shapes=hot,
                               hardware=load_hardware("h200"), settings=SandboxSettings(trials=2, timeout_s=300.0),
                               interpreter=not gpu))
    assert res.accepted, (res.failed_stage, res.reasons)
    visible = [s for s in res.shapes if not s.holdout]
    assert {s.id for s in visible} == {s.id for s in hot} and any(s.holdout for s in res.shapes)
    assert all(s.error is None for s in res.shapes), [s.error for s in res.shapes if s.error]
    if gpu:
        assert all(s.t_us and s.t_us > 0 for s in visible), [(s.id, s.t_us) for s in visible]
