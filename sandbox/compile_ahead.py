"""Compile ahead: every kernel specialization a candidate will need for a list of shapes, compiled in
parallel by forked processes before its trials call the shapes one at a time.

Why: Triton compiles a specialization at its first call, on the calling thread, one after another. A
fused_moe candidate needs some 26 specializations for its 8 hot shapes and more for each hidden hold-out
(odd sizes change the integer and divisibility specializations); on the H200 these compiles were most of a
candidate's evaluation (hold-outs 22-76 s, attribution 3-20 s), on one core of sixteen. Compile threads do
not help: Triton's MLIR passes hold the GIL (two threads were slower than one here).

How (in processes forked from the worker, the sandboxed process, so that nothing the pass runs can change the
worker's state, its CUDA context or the candidate's module; nothing here changes what is checked or timed):
1. Collect, in a forked collector process whose Triton driver is a stand-in that answers without CUDA (and
   whose torch.cuda device queries, such as the SM count a persistent grid reads, answer with the worker's
   GPU's, read before the fork). The candidate's launcher runs once per shape on *meta* tensors (shape, dtype, strides and
   storage offset of the real inputs, no memory): its torch calls only infer shapes, so it cannot fault
   on the device, and `JITFunction._do_compile` is replaced for the pass by one that records the
   specialization (kernel, signature, constexprs, attributes, options, target) and returns None, which
   makes `JITFunction.run` return before any launch (triton 3.6 and 3.7); `run` itself is called with
   warmup=True for the pass, so a specialization compiled earlier in the process (found in memory, never
   passed to `_do_compile`) is not launched on meta pointers either. A meta tensor's data_ptr is
   its byte offset, so pointer-divisibility specializations match those of real allocations (which the
   caching allocator aligns to 512 bytes), and where the real inputs are on the GPU a meta tensor answers
   `is_cuda` True, so a launcher takes the GPU's path (PDL, no interpreter rounding) here too. An autotuned
   kernel stops the pass: its tuner would time
   launches that never happen and cache the winner of nothing.
2. Compile. `jobs` processes forked from the collector (a child calls no CUDA API, only the compiler for
   the recorded target) share the recorded specializations and compile them into the worker's Triton
   cache directory, then exit; the collector reports counts and seconds to the worker over a pipe.
3. The trials then call the kernels as always; each first call finds its specialization in the on-disk
   cache and loads it instead of compiling (0.5 s for 26 on the CPU here, against 18 s of compiles).

Everything is best effort: a shape whose launcher fails on meta tensors, a child that fails or runs past
the deadline, a triton without these internals: the trials compile what is missing themselves, as before.
The pass reports counts and seconds only; it never rejects a candidate.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

DEFAULT_TIMEOUT_S = 120.0
COLLECTOR_GRACE_S = 20.0      # the collector's own limit past the compile children's; the worker waits 10 s more
MAX_JOBS = 16


class _AutotunerSeen(Exception):
    pass


def default_jobs() -> int:
    """Host cores less one (the worker's own), at most MAX_JOBS."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        n = os.cpu_count() or 1
    return max(1, min(MAX_JOBS, n - 1))


def to_meta(value: Any, torch) -> Any:
    """A meta tensor with the value's dtype, size, strides and storage offset (tensors in lists and tuples
    too); anything else as it is."""
    if isinstance(value, torch.Tensor):
        numel = max(value.untyped_storage().nbytes() // max(value.element_size(), 1), 1)
        base = torch.empty(numel, dtype=value.dtype, device="meta")
        return base.as_strided(value.size(), value.stride(), value.storage_offset())
    if isinstance(value, (list, tuple)):
        return type(value)(to_meta(v, torch) for v in value)
    return value


def collect(fn: Callable, meta_inputs: list[dict]) -> tuple[list[tuple], list[str]]:
    """(specializations, notes): what fn's kernels would compile for each input dict, nothing launched."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction
    found: dict[tuple, tuple] = {}
    notes: list[str] = []

    def record(self, key, signature, device, constexprs, options, attrs, warmup):
        target = self.device_caches[device][2]
        found.setdefault((id(self), str(key)), (self, signature, constexprs, attrs, options, target))
        return None

    def refuse(self, *args, **kwargs):
        raise _AutotunerSeen()

    def no_launch(self, *args, grid, warmup, **kwargs):
        # a specialization already compiled in this process (an earlier shape's) is looked up, not launched:
        # launched on meta tensors it would read address 0 and leave a sticky CUDA error for the next trial
        return real_run(self, *args, grid=grid, warmup=True, **kwargs)

    real_compile, real_tune, real_run = JITFunction._do_compile, Autotuner.run, JITFunction.run
    JITFunction._do_compile, Autotuner.run, JITFunction.run = record, refuse, no_launch
    try:
        for i, inputs in enumerate(meta_inputs):
            try:
                fn(**inputs)
            except _AutotunerSeen:
                return [], ["an autotuned kernel: compiled at its first call instead"]
            except BaseException as e:  # noqa: BLE001 - any failure leaves that shape to its trials
                notes.append(f"shape {i}: the launcher raised {type(e).__name__} on meta tensors")
    finally:
        JITFunction._do_compile, Autotuner.run, JITFunction.run = real_compile, real_tune, real_run
    return list(found.values()), notes


def _bounded_child(seconds: float) -> None:
    """In a forked child: die with the process that forked it (Linux), and in any case after `seconds`: a
    launcher that loops forever on meta tensors, or a worker killed at its evaluation's deadline, must not
    leave the pass running."""
    import signal
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, int(seconds)))


def _fork() -> int:
    """os.fork() without Python 3.12's warning about forking a threaded process: the collector is forked from
    the worker (CUDA's threads) and calls neither CUDA nor any lock of theirs; its compile children fork from
    the single-threaded collector."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _compile(spec: tuple) -> None:
    jit, signature, constexprs, attrs, options, target = spec
    jit.compile(jit.ASTSource(jit, signature, constexprs, attrs), target=target, options=options.__dict__)


def compile_forked(specs: list[tuple], jobs: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Compile specs in up to `jobs` forked children (each takes every jobs-th); wait at most timeout_s.
    Returns {"children", "failed", "killed"}: children that exited non-zero or had to be killed."""
    import signal
    jobs = max(1, min(jobs, len(specs)))
    pids = []
    for c in range(jobs):
        pid = _fork()
        if pid == 0:                            # the child: compile its share, never return into the worker
            code = 0
            try:
                _bounded_child(timeout_s + 5)
                for spec in specs[c::jobs]:
                    try:
                        _compile(spec)
                    except BaseException:  # noqa: BLE001 - that one compiles at its first call
                        code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    deadline, failed, killed = time.monotonic() + timeout_s, 0, 0
    left = set(pids)
    while left:
        for pid in list(left):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                left.discard(pid)
                failed += int(os.waitstatus_to_exitcode(status) != 0)
        if left and time.monotonic() > deadline:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            killed, left = len(left), set()
        elif left:
            time.sleep(0.01)
    return {"children": jobs, "failed": failed, "killed": killed}


class StandInDriver:
    """What `JITFunction.run` asks of Triton's driver before it compiles, answered without CUDA: a process
    forked from a CUDA worker must not call CUDA (torch refuses to re-initialize it there), and the pass
    launches nothing. A launch that slipped through anyway would fail in the child, never in the worker."""

    def __init__(self, target, device: int = 0):
        self.target, self.device = target, device

    def get_current_device(self):
        return self.device

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target


def _device_queries(device) -> dict:
    """What a launcher may ask torch about the GPU (the SM count of a persistent grid, the capability),
    read in the worker before the fork: in the child torch refuses CUDA, and a meta tensor's device is not a
    GPU. Empty without CUDA (the CPU tests' stand-in driver)."""
    import torch
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    return {"properties": torch.cuda.get_device_properties(device),
            "capability": torch.cuda.get_device_capability(device), "device": device}


def _answer_device_queries(queries: dict) -> None:
    """In the collector: torch.cuda's device queries answered from the worker's GPU, for any device argument
    (a launcher passes its meta tensors' device)."""
    if not queries:
        return
    import torch
    torch.cuda.get_device_properties = lambda device=None: queries["properties"]
    torch.cuda.get_device_capability = lambda device=None: queries["capability"]
    torch.cuda.current_device = lambda: queries["device"]


def _meta_reads_as_cuda() -> None:
    """In the collector: a meta tensor answers `is_cuda` True, as the real input it stands for does. Launchers
    choose by it (programmatic dependent launch, an fp32 rounding path kept for the interpreter, a one-read
    path that needs a GPU), and a meta tensor's False would collect the CPU path's specializations, which the
    trials on the GPU never call."""
    import torch
    real = torch._C.TensorBase.is_cuda
    torch.Tensor.is_cuda = property(lambda t: True if t.is_meta else real.__get__(t))


def compile_ahead(fn: Callable, metas: list[dict], jobs: int | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S, inputs_on_cuda: bool = False) -> dict:
    """The whole pass for input dicts of meta tensors (to_meta), in a forked collector process (its own
    process group) that records the specializations and forks the compile children: whatever the
    candidate's launcher does on meta tensors (a workspace cached in a module global, a stray launch) stays
    in that process. inputs_on_cuda: the real inputs are on the GPU, so the meta tensors say is_cuda there.
    Returns a summary of counts and seconds; the worker's own state is never touched."""
    import json
    import select
    import signal
    t0 = time.monotonic()
    try:
        from triton.runtime.driver import driver
        target = driver.active.get_current_target()
        device = driver.active.get_current_device()
        queries = _device_queries(device)
    except Exception as e:  # noqa: BLE001 - no driver, no pass
        return {"specializations": 0, "notes": [f"not available: {type(e).__name__}"], "collect_s": 0.0,
                "compile_s": 0.0}
    read_fd, write_fd = os.pipe()
    pid = _fork()
    if pid == 0:                              # the collector: never returns into the worker
        code = 0
        try:
            os.close(read_fd)
            _bounded_child(timeout_s + COLLECTOR_GRACE_S)
            os.setpgid(0, 0)                  # the worker can stop it and its compile children at once
            driver.set_active(StandInDriver(target, device))
            _answer_device_queries(queries)
            if inputs_on_cuda:
                _meta_reads_as_cuda()
            out = {}
            try:
                specs, notes = collect(fn, metas)
                out = {"specializations": len(specs), "notes": notes[:5], "collect_s": time.monotonic() - t0}
                t1 = time.monotonic()
                if specs:
                    out.update(compile_forked(specs, jobs or default_jobs(), timeout_s))
                out["compile_s"] = time.monotonic() - t1
            except (ImportError, AttributeError) as e:    # a triton without these internals
                out = {"specializations": 0, "notes": [f"not available: {type(e).__name__}: {e}"[:200]]}
            os.write(write_fd, json.dumps(out).encode())
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + timeout_s + COLLECTOR_GRACE_S + 10.0
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
    done, _ = os.waitpid(pid, os.WNOHANG)
    if not done:                              # past the deadline: the collector and its children go
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    try:
        summary = json.loads(b"".join(chunks).decode()) if chunks else {}
    except ValueError:
        summary = {}
    if not summary:
        summary = {"specializations": 0, "notes": ["the collector process ended without a summary"]}
    summary.setdefault("compile_s", 0.0)
    summary["wall_s"] = time.monotonic() - t0
    return summary
