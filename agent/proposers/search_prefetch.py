"""Compile a search move's kernels for Hopper on CPU cores before the GPU sees it, so GPU time goes
only to configs that can run.

What is checked. `compile_fn(source, op) -> CompileCheck` runs in a `concurrent.futures.ProcessPoolExecutor`
(spawned workers: a forked copy of a process that already imported triton in interpreter mode could not
compile). The default, `sandbox_compile_check`, asks the sandbox for its lint and compile gates only: the
candidate runs once at a tiny version of the operator's first shape inside the sandbox's isolated worker
(under the interpreter, GPU hidden), and every kernel that run launched is compiled for sm_90. The check
keeps, over those kernels: whether every one compiled, the largest spill, and the most shared memory per
block one needs. A move is dropped when a kernel does not compile, spills more than max_spill_bytes, or needs
more shared memory than MAX_SHARED_BYTES: on the GPU its launch fails with OutOfResources, after the
evaluation has started. The agent never runs candidate code itself (DESIGN.md section 4).

Probes. The tiny run reads one size bucket of a bucketed CONFIGS (fused_moe's, 8 rows per expert, reads the
"up to 12" bucket), so a move in any other bucket was compiled at the unchanged bucket and passed. In the H100
search of benchmarks/results/moe_decode_tiles.md that let 6 of 10 GPU screens fail on shared memory (278528 to
589848 bytes against 232448) or registers, all in the one bucket the run's shape reads. A *probe* is the
move's config with a bucket it changed copied into every sibling bucket, so the tiny run compiles the moved
tiles whatever bucket it reads. Only size buckets are copied (a dict keyed by ints, a list of (bound, config)
pairs): a copy across a list of per-kernel configs would compile one GEMM with another's tiles. A probe drops
a move only on what its compiled kernels show; a probe that compiled nothing (a launcher that cannot run the
copied bucket at the tiny shape, a failed checker) says nothing, and the move goes to the GPU as before, with
a note in its proposal. The tiny shape keeps the tiles, stages and dtype, which set the shared memory: the probe
of that run's move BLOCK_M 32 -> 64 counted 295936 bytes for GEMM 1, the H100 294912 (the gate adds the cubin's
static shared memory). A launcher that shrinks a tile to fit a tiny dimension makes a probe under-count: it
misses a drop, it does not make one.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from agent.proposers.search_space import config_key, get_at, set_at
from sandbox.compile_child import SHARED_LIMIT_BY_ARCH

# A few spilled bytes are common and cheap (the ptxas stack of a reduction); hundreds mean every
# thread goes to local memory in the inner loop. Not measured here: a conservative cut-off.
DEFAULT_MAX_SPILL_BYTES = 256
# Shared memory one block may use on Hopper (sm_90): 227 KiB = 232448 bytes, the opt-in maximum on both H100
# and H200 ("OutOfResources: shared memory, Required: 294912, Hardware limit: 232448" on the H100). The same
# table as the sandbox's compile gate, so the two cannot disagree.
MAX_SHARED_BYTES = SHARED_LIMIT_BY_ARCH[90]
# Probes a move may start: one a bucket it changes (a tied move over every bucket of fused_moe makes 7). Each is
# one sandbox compile-only evaluation, 2.5-5.8 s of wall time for fused_moe on a 2-core host; the heaviest
# shapes' buckets go first, the rest are left to the GPU as before.
MAX_PROBES = 4


@dataclass(frozen=True)
class CompileCheck:
    ok: bool                  # compiled without error
    spill_bytes: int = 0      # the largest spill (or stack) size over the candidate's kernels
    error: str = ""
    note: str = ""
    shared_bytes: int = 0     # the most shared memory per block one of its kernels needs (0: not known)
    shared_kernel: str = ""   # that kernel
    compiled: bool = False    # its kernels reached the compiler: a failure is theirs, not the tiny run's

    def viable(self, max_spill_bytes: int, max_shared_bytes: int = MAX_SHARED_BYTES) -> bool:
        return self.ok and self.spill_bytes <= max_spill_bytes and self.shared_bytes <= max_shared_bytes

    def refutes(self, max_spill_bytes: int, max_shared_bytes: int = MAX_SHARED_BYTES) -> bool:
        """A probe's verdict: its kernels compiled and show that the config cannot run."""
        return self.compiled and not self.viable(max_spill_bytes, max_shared_bytes)

    def reason(self, max_spill_bytes: int, max_shared_bytes: int = MAX_SHARED_BYTES) -> str:
        if self.shared_bytes > max_shared_bytes:    # before "does not compile": the gate rejects it as well
            return (f"kernel {self.shared_kernel} needs {self.shared_bytes} bytes of shared memory per block; "
                    f"Hopper allows {max_shared_bytes} (H100, H200): smaller tiles or fewer stages")
        if not self.ok:
            return f"does not compile: {self.error[:300]}"
        if self.spill_bytes > max_spill_bytes:
            return (f"spills {self.spill_bytes} bytes per thread (limit {max_spill_bytes}); "
                    f"smaller tiles or fewer stages would not")
        return "compiles"


CompileFn = Callable[[str, str], CompileCheck]


def read_compile_report(accepted: bool, reasons: list[str], info: dict) -> CompileCheck:
    """A CompileCheck from a compile-only EvalResult: its verdict and its compile_info's kernels."""
    kernels = [k for k in info.get("kernels") or [] if isinstance(k, dict)]
    spills = max((int(k.get("spills_bytes") or 0) for k in kernels), default=0)
    error, note = "; ".join(reasons)[:500], str(info.get("note") or "")
    if "fp32" in note:
        # the interpreter's bf16 run raised and the launches were recorded in fp32: tiles of twice the GPU's bytes
        return CompileCheck(accepted, spills, error, note=f"shared memory not judged: {note[:200]}")
    shared, name = max(((int(k.get("shared_bytes") or 0), str(k.get("name") or "?")) for k in kernels),
                       default=(0, ""))
    return CompileCheck(accepted, spills, error, shared_bytes=shared, shared_kernel=name, compiled=bool(kernels))


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
    return read_compile_report(result.accepted, list(result.reasons), result.compile_info)


# ---- probes: the moved bucket where the tiny run reads ---------------------------------------------

@dataclass(frozen=True)
class Probe:
    where: str                  # the bucket whose tiles it compiles: "CONFIGS['buckets'][3][1]"
    changed: tuple[tuple, ...]  # the leaves of that bucket the move changed
    config: Any                 # the move's config with that bucket copied into every sibling bucket


def _is_bucket_table(value: Any) -> bool:
    """A dict keyed by ints (rms_norm's `by_block_h`), or a list of (bound, config) pairs (gemm's `buckets`)."""
    if isinstance(value, dict):
        return bool(value) and all(isinstance(k, int) and not isinstance(k, bool) for k in value)
    if isinstance(value, (list, tuple)):
        return bool(value) and all(
            isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], (int, float))
            and not isinstance(e[0], bool) and isinstance(e[1], (dict, list, tuple)) for e in value)
    return False


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, path + (k,))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _leaves(v, path + (i,))]
    return [path]


def _bucket_root(config: Any, path: tuple) -> tuple[tuple, tuple[int, ...]] | None:
    """(the innermost size bucket holding `path`, the positions in it that pick a bucket); None outside buckets.
    For a (bound, config) pair the bucket is the config, so the bound stays."""
    steps, value, end = [], config, 0
    for i, key in enumerate(path):
        if _is_bucket_table(value):
            steps.append(i)
            end = i + (2 if isinstance(value, (list, tuple)) else 1)
        value = value[key]
    return (path[:end], tuple(steps)) if steps and end < len(path) else None


def _siblings(config: Any, root: tuple, steps: tuple[int, ...]) -> list[tuple]:
    """Every bucket at the place of `root`, any key at each bucket-picking position."""
    out: list[tuple] = []

    def walk(value: Any, i: int, prefix: tuple) -> None:
        if i == len(root):
            out.append(prefix)
            return
        keys = (list(value) if isinstance(value, dict) else range(len(value))) if i in steps else [root[i]]
        for key in keys:
            try:
                walk(value[key], i + 1, prefix + (key,))
            except (KeyError, IndexError, TypeError):
                continue
    walk(config, 0, ())
    return out


def bucket_probes(base: Any, config: Any) -> list[Probe]:
    """One probe per size bucket in which `config` differs from `base` (the climb point), in CONFIGS order;
    none where every sibling already holds the moved bucket."""
    by_root: dict[tuple, tuple[tuple[int, ...], list[tuple]]] = {}
    for path in _leaves(config):
        try:
            same = get_at(base, path) == get_at(config, path)
        except (KeyError, IndexError, TypeError):
            same = False
        found = None if same else _bucket_root(config, path)
        if found is not None:
            by_root.setdefault(found[0], (found[1], []))[1].append(path)
    probes = []
    for root, (steps, changed) in by_root.items():
        moved, probe = get_at(config, root), config
        for sibling in _siblings(config, root, steps):
            if sibling != root and type(get_at(config, sibling)) is type(moved):
                probe = set_at(probe, sibling, moved)
        if config_key(probe) != config_key(config):
            probes.append(Probe("CONFIGS" + "".join(f"[{p!r}]" for p in root), tuple(changed), probe))
    return probes


# ---- the pool ----------------------------------------------------------------------------------

# The pool's processes (and the sandbox workers they start, which inherit it) run this much nicer than the loop:
# they compile the next moves while the GPU times the current one, and the process that queues the timed replays
# must get a core when it wants one (session 37: evaluations beside the pool read the floor at 1.06-1.73 us, quiet
# processes 1.42-1.54; benchmarks/gpu_timer.py held_batch is the timer's own guard).
POOL_NICENESS = 10


def _worker_init() -> None:
    # Compiling needs triton's real JIT; the interpreter flag (set for tests and CPU runs) would
    # make @triton.jit return interpreted functions that cannot be compiled.
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        os.nice(POOL_NICENESS)
    except OSError:          # a platform or sandbox that refuses: the checks run at the loop's priority
        pass


class CompilePool:
    """Futures of CompileCheck, keyed by the caller's candidate key; results are kept for reuse."""

    def __init__(self, compile_fn: CompileFn, max_workers: int | None = None):
        self.compile_fn = compile_fn
        self.max_workers = max_workers or max(1, min(8, (os.cpu_count() or 2) - 1))
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[str, Future] = {}

    def submit(self, key: str, source: str, op: str) -> Future:
        if key not in self._futures:
            try:
                self._futures[key] = self._executor().submit(self.compile_fn, source, op)
            except BrokenProcessPool:
                # a worker died (killed, out of memory): its futures already read as failed checks (result);
                # a fresh pool takes the new ones, else every later proposal would raise this too (an H100
                # run recorded 446 "no candidate" iterations in 15 s after its workers were killed)
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
                self._futures[key] = self._executor().submit(self.compile_fn, source, op)
        return self._futures[key]

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.max_workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_worker_init)
        return self._pool

    def result(self, key: str) -> CompileCheck:
        """Waits for the compile when it has not finished: a move is never handed out unchecked."""
        try:
            return self._futures[key].result()
        except Exception as exc:   # the checker itself failed: let the sandbox decide on the GPU box
            return CompileCheck(True, note=f"pre-compile check failed ({type(exc).__name__}: {str(exc)[:200]})")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class MoveChecks:
    """The checks of search moves: each move's own source and its probes' (where, key), in one CompilePool.

    A control: the incumbent's source, checked the same way. The tiny run happens under Triton's interpreter,
    and an interpreter that cannot run the operator at all fails every move before any kernel reaches the
    compiler: Triton 3.6's, with a recent NumPy, raises "only 0-dimensional arrays can be converted to Python
    scalars" on the seeds of fused_moe, gemm, moe_align_block_size, moe_sum_reduce, softmax and
    top_k_top_p_filter, and the search dropped every move of those operators on the GPU machines, proposing
    nothing for minutes (benchmarks/results/optimize_h200.md, 2026-12-06; the sandbox's interpreter workers now
    patch that case, sandbox/interpreter_compat.py). Whatever the next such incompatibility is, a failure before
    any kernel compiled is the move's own only when the incumbent's run got further; when the incumbent fails
    the same way the check cannot judge here, and the move goes to the GPU with a note."""

    def __init__(self, compile_fn: CompileFn, max_workers: int | None, max_spill_bytes: int,
                 max_shared_bytes: int = MAX_SHARED_BYTES):
        self.pool = CompilePool(compile_fn, max_workers)
        self.max_spill_bytes, self.max_shared_bytes = max_spill_bytes, max_shared_bytes
        self._probes: dict[str, list[tuple[str, str]]] = {}
        self._controls: dict[str, str] = {}

    def submit(self, key: str, source: str, op: str, probes: Sequence[tuple[str, str, str]] = (),
               control: tuple[str, str] | None = None) -> None:
        """Start the compiles of a move (key, source), of its probes (where, key, source) and of its control
        (key, source: the incumbent's; compiled once, its result kept)."""
        if control is not None:
            self.pool.submit(control[0], control[1], op)
            self._controls[key] = control[0]
        self.pool.submit(key, source, op)
        self._probes[key] = [(where, k) for where, k, _ in probes]
        for _, k, text in probes:
            self.pool.submit(k, text, op)

    def verdict(self, key: str) -> tuple[str | None, str]:
        """(why the move must not reach the GPU, or None; a note on what could not be checked)."""
        limits = (self.max_spill_bytes, self.max_shared_bytes)
        check = self.pool.result(key)
        probes = self._probes.pop(key, [])
        control_key = self._controls.pop(key, None)
        if not check.viable(*limits):
            blind = self._blind(check, control_key)
            if blind:
                return None, blind
            return check.reason(*limits), ""
        notes = [check.note] if check.note else []
        for where, k in probes:
            probe = self.pool.result(k)
            if probe.refutes(*limits):
                return f"{probe.reason(*limits)} (the tiles this move sets in {where})", ""
            if not probe.compiled or probe.note:
                notes.append(f"{where} not compiled before the GPU: "
                             f"{(probe.note or probe.error or 'no kernel reported')[:200]}")
        return None, "; ".join(notes)

    def _blind(self, check: CompileCheck, control_key: str | None) -> str:
        """A note when the failed check says nothing of the move (its run failed before any kernel compiled,
        and so did the incumbent's); "" when the failure is the move's own."""
        if check.compiled or control_key is None:
            return ""
        control = self.pool.result(control_key)
        if control.ok or control.compiled:
            return ""
        return (f"not checked before the GPU: the check's tiny run fails on the incumbent too "
                f"({(control.error or control.note or 'no reason given')[:200]})")

    def close(self) -> None:
        self.pool.close()
