"""Compile candidates on CPU cores ahead of time, so GPU time goes only to viable ones.

`CompilePool` runs a pluggable `compile_fn(source, op) -> CompileCheck` in a
`concurrent.futures.ProcessPoolExecutor` (spawned workers: a forked copy of a process that already
imported triton in interpreter mode could not compile). The default, `sandbox_compile_check`, asks
the sandbox for a lint + compile-gate-only evaluation: the candidate runs once at a tiny shape
inside the sandbox's isolated worker (under the interpreter, GPU hidden), every launch is
recorded and compiled for Hopper (sm_90), and the report gives registers and spilled bytes per
kernel. The agent never runs candidate code itself (DESIGN.md section 4).
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable

# A few spilled bytes are common and cheap (the ptxas stack of a reduction); hundreds mean every
# thread goes to local memory in the inner loop. Not measured here: a conservative cut-off.
DEFAULT_MAX_SPILL_BYTES = 256


@dataclass(frozen=True)
class CompileCheck:
    ok: bool                  # compiled without error
    spill_bytes: int = 0      # the largest spill (or stack) size over the candidate's kernels
    error: str = ""
    note: str = ""

    def viable(self, max_spill_bytes: int) -> bool:
        return self.ok and self.spill_bytes <= max_spill_bytes

    def reason(self, max_spill_bytes: int) -> str:
        if not self.ok:
            return f"does not compile: {self.error[:300]}"
        if self.spill_bytes > max_spill_bytes:
            return (f"spills {self.spill_bytes} bytes per thread (limit {max_spill_bytes}); "
                    f"smaller tiles or fewer stages would not")
        return "compiles"


CompileFn = Callable[[str, str], CompileCheck]


def sandbox_compile_check(source: str, op: str) -> CompileCheck:
    """Lint and compile gates of the sandbox on one candidate, at the operator's first shape."""
    from benchmarks.registry import load_operator
    from sandbox.evaluation import evaluate
    from sandbox.session import compile_only_request
    from sandbox.settings import SandboxSettings

    spec = load_operator(op)
    if not spec.shapes:
        return CompileCheck(True, note=f"operator {op} has no shapes: not pre-compiled")
    req = compile_only_request(op, source, settings=SandboxSettings(timeout_s=300.0))
    result = evaluate(req)
    kernels = result.compile_info.get("kernels") or []
    spills = max((int(k.get("spills_bytes") or 0) for k in kernels if isinstance(k, dict)), default=0)
    return CompileCheck(result.accepted, spills, "; ".join(result.reasons)[:500])


def _worker_init() -> None:
    # Compiling needs triton's real JIT; the interpreter flag (set for tests and CPU runs) would
    # make @triton.jit return interpreted functions that cannot be compiled.
    os.environ.pop("TRITON_INTERPRET", None)


class CompilePool:
    """Futures of CompileCheck, keyed by the caller's candidate key; results are kept for reuse."""

    def __init__(self, compile_fn: CompileFn, max_workers: int | None = None):
        self.compile_fn = compile_fn
        self.max_workers = max_workers or max(1, min(8, (os.cpu_count() or 2) - 1))
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[str, Future] = {}

    def submit(self, key: str, source: str, op: str) -> Future:
        if key not in self._futures:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self.max_workers, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=_worker_init)
            self._futures[key] = self._pool.submit(self.compile_fn, source, op)
        return self._futures[key]

    def result(self, key: str) -> CompileCheck:
        try:
            return self._futures[key].result()
        except Exception as exc:   # the checker itself failed: let the sandbox decide on the GPU box
            return CompileCheck(True, note=f"pre-compile check failed ({type(exc).__name__}: {str(exc)[:200]})")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
