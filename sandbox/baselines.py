"""What a user runs instead of the candidate: the baselines `aka bench --baseline NAME` scores.

- eager:   the operator's `baseline()` (else its `reference`) in plain PyTorch.
- compile: the same function under torch.compile with static shapes (`dynamic=False`): one specialized
  graph per shape, as a serving engine gets for each batch size it captures. torch.compile's default
  (`dynamic=None`) turns a dimension symbolic the second time it sees a new size, and the worker calls
  one compiled function on every shape of the set: from the second shape on, dynamo traced symbolic
  sizes and Inductor generated dynamic-shape kernels (seen with a recording backend:
  tests/sandbox/test_baselines.py). On the H200 that baseline read 1.6-2.1x slower than a per-shape
  static compile on rms_norm and 1.1-2.4x on silu_and_mul (2026-12-01): it understated the competitor.
- liger:   Liger-Kernel's Triton kernel for the operator (`baseline_liger` in operator.py; an optional
  dependency, imported only when asked for).
- cublas:  the vendor library as PyTorch ships it (`baseline_cublas`: torch.matmul for gemm).

An operator offers a library baseline NAME by defining `baseline_NAME(**inputs)` in operator.py, and
optionally `baseline_NAME_inputs(**inputs) -> dict`: the inputs in the form the library takes them
(e.g. gate and up as two tensors), converted once per input set outside the timed call. For an operator
that writes arguments in place (MUTATES) the baselines write them too: `eager` and `compile` run the
operator's own `baseline`/`reference` on the worker's arguments, and a library's input hook must pass the
mutated arguments through as they are (the gate reads the result from them).
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

BASELINES = ("eager", "compile", "liger", "cublas")
# Library baselines: the module they import and how to install it.
PACKAGES = {"liger": ("liger_kernel", "pip install liger-kernel==0.8.5 (the project's `baselines` extra, which make installs)")}
# torch.compile compiles one graph per shape; dynamo's default cache (8 graphs per function) would run
# a larger shape set eagerly from the ninth shape on.
RECOMPILE_LIMIT = 64


@dataclass(frozen=True)
class Baseline:
    name: str
    fn: Callable[..., Any]
    prepare: Callable[[dict], dict]     # operator inputs -> the call's keyword arguments (not timed)


def _same(inputs: dict) -> dict:
    return inputs


def _library_hooks(module: ModuleType, name: str):
    fn = getattr(module, f"baseline_{name}", None)
    return fn, getattr(module, f"baseline_{name}_inputs", None)


def offered_by(module: ModuleType) -> list[str]:
    """The baselines an operator module offers (eager and compile always)."""
    return ["eager", "compile"] + [n for n in BASELINES[2:] if _library_hooks(module, n)[0] is not None]


def unavailable(module: ModuleType, name: str, op: str = "") -> str | None:
    """Why baseline `name` cannot run for this operator (a message with the fix), or None if it can."""
    op = op or getattr(module, "NAME", "?")
    if name not in BASELINES:
        return f"--baseline {name!r} is not one of {', '.join(BASELINES)}"
    if name in ("eager", "compile"):
        return None
    if _library_hooks(module, name)[0] is None:
        return (f"--baseline {name} has nothing for {op}: this operator offers {', '.join(offered_by(module))} "
                f"(an operator offers a library baseline by defining baseline_{name}() in its operator.py)")
    package = PACKAGES.get(name)
    if package and importlib.util.find_spec(package[0]) is None:
        return f"--baseline {name} needs the Python package {package[0]}, which is not installed: {package[1]}"
    return None


def build(module: ModuleType, name: str, *, backend: Any = "inductor") -> Baseline:
    """The callable that `name` times for this operator. `backend` is torch.compile's (tests pass a
    recording one); it matters only for `compile`."""
    reason = unavailable(module, name)
    if reason:
        raise ValueError(reason)
    if name in ("eager", "compile"):
        fn = getattr(module, "baseline", module.reference)
        if name == "compile":
            import torch
            import torch._dynamo
            for knob in ("cache_size_limit", "recompile_limit"):
                if hasattr(torch._dynamo.config, knob):
                    setattr(torch._dynamo.config, knob, max(getattr(torch._dynamo.config, knob), RECOMPILE_LIMIT))
            fn = torch.compile(fn, dynamic=False, backend=backend)
        return Baseline(name, fn, _same)
    fn, prepare = _library_hooks(module, name)
    if prepare is None:
        return Baseline(name, fn, _same)
    mutates = tuple(getattr(module, "MUTATES", ()))

    def prepared(inputs: dict) -> dict:
        out = prepare(**inputs)
        # the gate reads an in-place operator's result from ITS arguments: a converted copy would hide it
        moved = [m for m in mutates if out.get(m) is not inputs[m]]
        if moved:
            raise ValueError(f"baseline_{name}_inputs of {getattr(module, 'NAME', '?')} replaced {moved}, which the "
                             f"operator writes in place (MUTATES): pass those arguments through unchanged")
        return out
    return Baseline(name, fn, prepared)
