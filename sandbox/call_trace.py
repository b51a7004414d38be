"""What one call does, as a digest two processes can compare: its Triton launches and torch ops, in order.

Why. The same work cannot be faster, yet a timer can read it so: the loop's A/B accepts a candidate no faster
than the incumbent with probability alpha (1%), and spends an A/B's GPU time to decide. The offline search proposes
such candidates often: a setting read only on a path the scored shapes do not take. In session 31's softmax run
on an H100 (benchmarks/results/optimize_h200.md), 5 of 70 candidates differed from the incumbent only in such
settings (ONE_READ, ONE_READ_MIN_BYTES, PDL at T = 64). agent/no_op.py rejects a candidate whose calls do the
incumbent's work at every scored shape, before any A/B.

The digest covers, in call order:
- every Triton launch (not deduplicated): the kernel's name and its code (JITFunction.cache_key: its source and
  the jit functions and globals it uses; under the interpreter a hash of its source), constexprs, num_warps,
  num_stages and the other options, the grid, and every runtime argument;
- every aten op torch's dispatcher sees (allocations, copies, torch math): its name and its arguments.
A tensor counts by dtype, shape, strides and storage offset, never by address: addresses differ between
processes and say nothing about the work. Two calls with one digest run the same kernels on the same sizes in
the same order; what is left between them is where their buffers landed.
"""
from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

MAX_DEPTH = 4


def summary(value: Any, depth: int = 0) -> Any:
    """A JSON-able stand-in for an argument that is equal for equal work in any process."""
    try:
        import torch
        if isinstance(value, torch.Tensor):
            return ["tensor", str(value.dtype), list(value.shape), list(value.stride()), int(value.storage_offset())]
        if isinstance(value, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
            return str(value)
    except ImportError:
        pass
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)          # NaN and infinities as text, every float exactly
    if isinstance(value, (list, tuple)):
        return [summary(v, depth + 1) for v in value] if depth < MAX_DEPTH else type(value).__name__
    if isinstance(value, dict):
        return ({str(k): summary(v, depth + 1) for k, v in value.items()} if depth < MAX_DEPTH
                else type(value).__name__)
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict) and depth < MAX_DEPTH:      # e.g. a TMA TensorDescriptor: base, shape, block
        return [type(value).__name__, {k: summary(v, depth + 1) for k, v in sorted(fields.items())
                                       if not k.startswith("__")}]
    return [type(value).__name__, repr(value)[:80]]


def kernel_identity(kernel) -> str:
    """The code a launch runs: triton's own cache key on a GPU build, a hash of the source under the interpreter."""
    key = getattr(kernel, "cache_key", None)
    if isinstance(key, str):
        return key
    fn = getattr(kernel, "fn", kernel)
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = getattr(fn, "__qualname__", repr(fn))
    return "src:" + hashlib.sha256(source.encode()).hexdigest()[:24]


def launch_entry(kernel, record, bound: dict, signature: dict) -> list:
    """One launch of sandbox.compile.LaunchRecorder's trace: identity, specialization, grid, runtime arguments."""
    from sandbox.launch_record import encoded_constexprs
    runtime = {name: summary(bound[name]) for name, kind in signature.items()
               if kind != "constexpr" and name in bound}
    return [record.kernel_name, kernel_identity(kernel), encoded_constexprs(record.constexprs), record.num_warps,
            record.num_stages, summary(dict(record.options)), list(record.divisible_by_16), list(record.grid),
            runtime]


def aten_ops():
    """A context manager that lists every aten op of the calls inside it (`.events`), or None without torch."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return None

    class AtenOps(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.events: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            self.events.append([str(func), summary(list(args)), summary(kwargs)])
            return func(*args, **kwargs)

    return AtenOps()


def digest(launches: list, ops: list) -> str:
    text = json.dumps({"launches": launches, "ops": ops}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
