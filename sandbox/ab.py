"""A/B re-measure of two kernels that both passed every gate, in ONE worker, interleaved.

Two fresh processes measure the same kernel up to 3% apart on the H200 (benchmarks/results/sandbox_h200.md:
gemm M4096 802.7 vs 776.9 us; 9% on a 2.5 us decode shape), so a comparison across processes needs many of
them. Inside one process both kernels share the clocks, the allocator state and the machine's mood of the
moment; what is left is round-to-round jitter, which a paired statistic over many short rounds averages out
(agent/acceptance.py decides; this module only measures).

Per shape, in the worker: both kernels get the same rotated input sets (fresh seeds from the parent), are
warmed up, checked for host syncs and captured into CUDA graphs of `calls` x (write the 256 MiB flush
buffer, call), next to a flush-only graph. Then `rounds` rounds, alternating the order A B, B A, A B ...
(so A B B A A B ...: a drift within a round favours neither side); each measurement is one replay of a
kernel's graph followed by one of the flush-only graph, per-call time = (t_with - t_without) / calls.
The parent gets back, per shape, the per-round seconds of A and of B.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

from sandbox import correctness as cx
from sandbox.compile_cache import CompileCache
from sandbox.conversation import Conversation
from sandbox.correctness import HarnessError, Rejected
from sandbox.gpu_gates import add_hold_stats
from sandbox.prestart import WorkerPool
from sandbox.stage_times import StageClock
from sandbox.verdict import EvalResult

AB_INPUT_SETS = 4
TARGET_REPLAY_S = 1e-3      # calls per graph: enough that one replay takes ~1 ms (the flush jitter shrinks as 1/calls)
MAX_CALLS = 10


@dataclass(frozen=True)
class ABSeries:
    """Per-round per-call seconds of A (the request's source) and B (the other source), per shape."""

    shape_ids: tuple[str, ...]
    a: tuple[tuple[float, ...], ...]            # a[shape][round]
    b: tuple[tuple[float, ...], ...]
    rounds: int
    floor_s: float | None = None
    error: str | None = None                    # set when the re-measure could not finish (nothing is decided)
    wall_s: float = 0.0
    stage_times: tuple[tuple[str, float], ...] = ()
    environment: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"shape_ids": list(self.shape_ids), "a": [list(x) for x in self.a], "b": [list(x) for x in self.b],
                "rounds": self.rounds, "floor_s": self.floor_s, "error": self.error, "wall_s": self.wall_s,
                "stage_times": [list(p) for p in self.stage_times]}


def calls_per_graph(t_call_s: float, n_sets: int) -> int:
    """At least one call per input set; more for short calls, up to MAX_CALLS (pure; tested on the CPU)."""
    if not t_call_s > 0:
        return max(n_sets, MAX_CALLS)
    return int(max(n_sets, min(MAX_CALLS, math.ceil(TARGET_REPLAY_S / t_call_s))))


def round_order(rounds: int) -> list[tuple[int, int]]:
    """(first, second) kernel index per round: (0, 1), (1, 0), (0, 1), ... -- A B B A A B ..."""
    return [(0, 1) if r % 2 == 0 else (1, 0) for r in range(rounds)]


# ---------------------------------------------------------------- parent side

class _ABConversation(Conversation):
    def __init__(self, req, other_source: str, operator_dir, pool, cache):
        import torch
        self.req, self.other = req, other_source
        self.settings, self.op, self.operator_dir, self.pool, self.cache = req.settings, req.op, operator_dir, pool, cache
        self._init_conversation()
        self.interpreter = False if req.interpreter is None else bool(req.interpreter)
        if self.interpreter or not torch.cuda.is_available():
            raise ValueError("an A/B re-measure times kernels on a GPU; without one there is nothing to compare "
                             "(the loop's interpreter rule applies instead)")
        self.device = "cuda"
        self.base_seed = cx.fresh_base_seed() if req.seed is None else int(req.seed)
        self.result = EvalResult(op=req.op)
        self.a: list[tuple[float, ...]] = []
        self.b: list[tuple[float, ...]] = []
        self.floor_s: float | None = None

    def body(self, w) -> None:
        self.stage, self.activity = "timing", "measuring the latency floor"
        with self._timed("floor"):
            w.send({"kind": "floor"})
            floor = self._expect(w, "floor")[0]
            self.floor_s = float(floor["t_floor_s"])
        hold = self.result.environment["timing_hold"] = add_hold_stats({}, floor.get("hold"))
        for shape in self.req.shapes:
            self.activity = f"A/B rounds on shape {shape.id}"
            with self._timed("ab_rounds"):
                w.send({"kind": "ab_time", "dims": shape.dim, "dtype": shape.dtype,
                        "rounds": self.settings.ab_rounds,
                        "seeds": [cx.derive_seed(self.base_seed, "ab", shape.id, k) for k in range(AB_INPUT_SETS)]})
                reply, _ = self._expect(w, "ab_timing")
            self.clock.merge(reply.get("stage_s"), "ab_rounds/")
            add_hold_stats(hold, reply.get("hold"))
            if reply.get("error"):
                raise Rejected("timing", f"shape {shape.id}: {reply['error']}")
            self.a.append(tuple(float(x) for x in reply["a"]))
            self.b.append(tuple(float(x) for x in reply["b"]))


def measure_ab(req, other_source: str, *, operator_dir: str | None = None, pool: WorkerPool | None = None,
               cache: CompileCache | None = None) -> ABSeries:
    """Time `req.source` (A) and `other_source` (B) on `req.shapes` in one fresh worker. A failure of
    either kernel (they both passed every gate, so it should not happen) comes back as `error`."""
    t0 = time.monotonic()
    conv = _ABConversation(req, other_source, operator_dir, pool, cache)
    error = None
    try:
        conv._in_worker(conv.body, {"candidate_sources": [req.source, other_source]})
    except Rejected as e:
        error = f"{e.stage}: {e.reason}"
    except HarnessError as e:
        error = f"harness: {e}"
    ids = tuple(s.id for s in req.shapes)[:len(conv.a)]
    return ABSeries(ids, tuple(conv.a), tuple(conv.b), req.settings.ab_rounds, conv.floor_s, error,
                    time.monotonic() - t0, conv.clock.freeze(), dict(conv.result.environment))


# ---------------------------------------------------------------- worker side

def on_ab_time(worker, msg: dict) -> None:
    """The worker's "ab_time" handler: both loaded kernels, one shape, `rounds` interleaved rounds."""
    from benchmarks import gpu_lock, gpu_timer
    torch = worker.torch
    clock = StageClock()       # seconds per step of this shape, summed by the parent as ab_rounds/<step>
    fns = [_with_cache(_guarded(fn), folder) for fn, folder in zip((worker.fn, worker.fn_b), worker.cache_dirs)]
    with clock.stage("inputs"):
        sets = [worker.make_inputs(msg["dims"], msg["dtype"], s) for s in msg["seeds"]]
        flush = gpu_timer.make_flush_buffer()
    try:
        with clock.stage("warm_up"):   # the first calls: each kernel's specializations load from its cache here
            for fn in fns:
                gpu_timer.warm_up(fn, sets, 5)
                gpu_timer.reject_host_sync(fn, sets[0])
    except gpu_timer.GraphCaptureError as e:
        worker.reply({"kind": "ab_timing", "error": f"cannot time in a CUDA graph: {e}",
                      "stage_s": dict(clock.freeze())})
        return
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fns[0](sets[0])
    end.record()
    torch.cuda.synchronize()
    calls = calls_per_graph(start.elapsed_time(end) / 1e3, len(sets))

    def body(fn):
        def run():
            for i in range(calls):
                gpu_timer.write_flush(flush)
                fn(sets[i % len(sets)])
        return run

    def flush_only():
        for _ in range(calls):
            gpu_timer.write_flush(flush)

    try:
        with clock.stage("capture"):
            graphs = [gpu_timer.capture(body(fn)) for fn in fns]
            empty = gpu_timer.capture(flush_only)
    except gpu_timer.GraphCaptureError as e:
        worker.reply({"kind": "ab_timing", "error": str(e), "stage_s": dict(clock.freeze())})
        return
    times: list[list[float]] = [[], []]
    t_rounds = time.monotonic()
    with gpu_lock.exclusive(torch.cuda.current_device()):     # the rounds as one timed phase (off unless set)
        for order in round_order(int(msg["rounds"])):
            # both kernels' replays, each followed by a flush-only one, queued whole behind a hold (gpu_timer)
            for k, (with_s, without_s) in zip(order, gpu_timer.timed_pairs([graphs[k] for k in order], empty)):
                times[k].append((with_s - without_s) / calls)
    clock.add("rounds", time.monotonic() - t_rounds)
    worker.reply({"kind": "ab_timing", "a": times[0], "b": times[1], "calls": calls,
                  "stage_s": dict(clock.freeze()), "hold": gpu_timer.take_hold_stats()})


def _with_cache(fn, folder: str | None):
    """fn, run with TRITON_CACHE_DIR at `folder` (the kernel's own source's directory, from the parent): triton
    reads the variable at each compile, so whatever this kernel compiles or loads comes from its own source's
    cache, never the other kernel's. None: the worker's setting stands (no cache, or a private one)."""
    if not folder:
        return fn

    def run(inputs: dict):
        os.environ["TRITON_CACHE_DIR"] = folder
        return fn(inputs)
    return run


def _guarded(fn):
    from sandbox.worker import _failure

    def run(inputs: dict):
        try:
            return fn(**inputs)
        except BaseException as e:  # noqa: BLE001 - the candidate must not end or escape the worker
            raise _failure(e) from None
    return run
