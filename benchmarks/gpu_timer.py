"""Device timing core shared by the sandbox's timer and `aka calibrate`: L2 flush, CUDA-graph replay,
eager launches, the latency floor kernel and the statistics over samples.

It lives in `benchmarks` because the calibration must time the floor exactly as candidates are timed
and `benchmarks` imports no other aka package; `sandbox/timing.py` builds its TimingResult on it.
Everything that touches CUDA does so inside functions: the module imports without a GPU.

Method (RECIPES.md, "Timing on the H200"): capture one graph of R x (write a 256 MiB flush buffer,
call fn on input set i mod n) and one of R x (write the flush buffer); replay them alternately,
back to back, each interval between two CUDA events; per-call time = (t_with - t_without) / R.
A timed batch is queued behind a hold (held_batch): the GPU spins until the host has queued every replay, so
no host delay falls inside an interval. Where AKA_GPU_LOCK is set, timing holds the GPU's lock (gpu_lock.py), so
a pre-started worker's GPU start-up waits until the timed replays are done.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import triton
import triton.language as tl

from benchmarks import gpu_lock

FLUSH_BYTES = 256 << 20          # >4x the H200's 60 MB L2: one write evicts everything a call left there
CALLS_PER_GRAPH = 10             # R: the flush-time jitter on a sample shrinks as 1/sqrt(R)
MIN_SAMPLES = 5                  # replay pairs at least, whatever reps says
MAX_SAMPLES = 200
MIN_TIMED_S = 0.02               # tiny calls get more replay pairs until ~20 ms of GPU time was timed
# The hold before a timed batch (held_batch). Without one, a host thread descheduled while it queues the replays
# lets the GPU drain its queue and idle inside a timed interval. In session 37's searches on an H100 (the search's
# compile pool busy on the host beside the timing) evaluations read the floor at 1.06-1.73 us where 12 quiet
# processes read 1.42-1.54, and one shape's median came out negative (-1.3 us for a 36 us kernel). Whether the
# busy host did that, and whether the hold stops it, is what agent/studies/floor_spread.py --load measures.
HOLD_FIXED_S = 0.0005            # the first hold: this much... (an A/B round is ~4 ms of replays: 0.75 ms held)
HOLD_PER_OP_S = 25e-6            # ...plus this per replay or event queued (a few us each on a quiet host)
HOLD_GROWTH = 4                  # a batch the GPU started before the host had queued it all runs again, 4x held
HOLD_TRIES = 3                   # 1x, 4x, 16x; then the last batch stands, counted as unheld
HOLD_ENABLED = True              # False: batches run unheld, as before holds (agent/studies/floor_spread.py --no-hold)
HOLD_CYCLES_PER_S = 2.0e9        # torch.cuda._sleep spins clock cycles; at or above a Hopper SM's 1.98 GHz, a
                                 # hold lasts at least its seconds (longer at lower clocks: only GPU time lost)


class GraphCaptureError(RuntimeError):
    """The call cannot be timed inside a CUDA graph; the message says why and what to change."""


# ---------------------------------------------------------------- statistics (pure, CPU-testable)

def quantile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of a non-empty sequence, 0 <= q <= 1."""
    if not samples:
        raise ValueError("quantile of no samples; time at least one repetition")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q={q} must lie in [0, 1]")
    xs = sorted(float(x) for x in samples)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(samples: Sequence[float]) -> float:
    return quantile(samples, 0.5)


def spread(samples: Sequence[float]) -> float:
    """(p75 - p25) / median: the noise of a measurement relative to its value (0 for one sample)."""
    iqr = quantile(samples, 0.75) - quantile(samples, 0.25)
    mid = median(samples)
    if mid == 0.0:
        return 0.0 if iqr == 0.0 else math.inf
    return iqr / abs(mid)


def per_call_samples(t_with_s: Sequence[float], t_without_s: Sequence[float], calls: int) -> list[float]:
    """Pair each replay of the (flush + call) graph with the (flush only) replay that followed it."""
    if len(t_with_s) != len(t_without_s):
        raise ValueError(f"{len(t_with_s)} replays with calls but {len(t_without_s)} without; pair them one to one")
    if calls < 1:
        raise ValueError(f"calls per graph must be >= 1, got {calls}")
    return [(w - wo) / calls for w, wo in zip(t_with_s, t_without_s)]


def replay_count(t_replay_s: float, reps: int, calls: int = CALLS_PER_GRAPH, min_timed_s: float = MIN_TIMED_S,
                 min_samples: int = MIN_SAMPLES, max_samples: int = MAX_SAMPLES) -> int:
    """How many replay pairs to time: about `reps` calls in all, but at least `min_timed_s` of replays
    (cheap calls are dominated by the flush, so more samples cost little and steady the median)."""
    by_reps = math.ceil(max(reps, 1) / calls)
    by_time = math.ceil(min_timed_s / t_replay_s) if t_replay_s > 0 else max_samples
    return int(min(max_samples, max(min_samples, by_reps, by_time)))


# ---------------------------------------------------------------- the floor kernel

@triton.jit
def _floor_kernel(src_ptr, dst_ptr):
    # One dependent DRAM round trip: the store needs the loaded value.
    tl.store(dst_ptr, tl.load(src_ptr))


def floor_call(inputs: dict) -> None:
    """The smallest kernel that reads one value from memory and writes one."""
    _floor_kernel[(1,)](inputs["src"], inputs["dst"], num_warps=1)


@triton.jit
def _floor_pdl_kernel(src_ptr, dst_ptr):
    # The floor kernel under programmatic dependent launch: it may start while the kernel ahead of it drains and
    # waits for it before its load (sandbox/POLICY.md 7a).
    tl.extra.cuda.gdc_wait()
    tl.store(dst_ptr, tl.load(src_ptr))


def floor_call_pdl(inputs: dict) -> None:
    """floor_call launched with launch_pdl (compute capability 9+): the least a PDL kernel can take here."""
    _floor_pdl_kernel[(1,)](inputs["src"], inputs["dst"], num_warps=1, launch_pdl=True)


def floor_input_sets(n_sets: int = 4, device: str = "cuda") -> list[dict]:
    import torch
    return [{"src": torch.rand(1, device=device) + 1.0, "dst": torch.empty(1, device=device)} for _ in range(n_sets)]


# ---------------------------------------------------------------- device side

def make_flush_buffer(flush_bytes: int = FLUSH_BYTES):
    import torch
    if flush_bytes < 4:
        raise ValueError(f"flush_bytes={flush_bytes} is too small to evict L2; use at least 4x the L2 size (256 MiB)")
    return torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")


def write_flush(flush) -> None:
    # A pure write (no read) of the whole buffer: every L2 line now holds flush data.
    flush.fill_(1)


def warm_up(fn: Callable[[dict], Any], input_sets: Sequence[dict], warmup: int) -> None:
    """JIT compilation, autotuning and lazy allocations happen here, on a side stream, before any capture."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(max(warmup, len(input_sets))):
            fn(input_sets[i % len(input_sets)])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def _end_capture_quietly(graph) -> None:
    try:
        graph.capture_end()
    except Exception:
        pass  # the capture was already invalidated; ending it only takes the stream out of capture mode


def capture(body: Callable[[], Any]):
    """Capture body() into a CUDA graph on a private stream.

    Not `with torch.cuda.graph(...)`: when capture_end raises there, the stream context is never exited
    and the failed capture stream stays current for everything after it.
    """
    import torch
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        graph.capture_begin(capture_error_mode="global")
        try:
            body()
        except Exception as exc:
            _end_capture_quietly(graph)
            raise GraphCaptureError(_capture_message(exc)) from exc
        try:
            graph.capture_end()
        except Exception as exc:
            raise GraphCaptureError(_capture_message(exc)) from exc
    torch.cuda.synchronize()
    return graph


def reject_host_sync(fn: Callable[[dict], Any], inputs: dict) -> None:
    """Run fn once with CUDA's sync debug mode on "error": a host synchronization raises here, before
    any capture. A capture that fails half-way leaves torch's CUDA RNG in capture mode (seen on the H200,
    torch 2.11: every later torch.rand raised "Offset increment outside graph capture"), so calls that
    would fail the capture for a host sync must never reach it."""
    import torch
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn(inputs)
    except Exception as exc:   # any type: the sandbox worker re-raises candidate errors wrapped in its own
        if "synchroniz" in str(exc).lower():
            raise GraphCaptureError(_capture_message(exc)) from exc
        raise
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    torch.cuda.synchronize()


def _capture_message(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    kind = getattr(exc, "exc_type", "") or type(exc).__name__     # the sandbox worker wraps candidate errors
    if first.startswith(kind + ":"):
        first = first[len(kind) + 1:].strip()
    return (f"CUDA graph capture failed ({kind}: {first[:300]}). A call inside a CUDA graph may not "
            "synchronize with the host (.item(), .tolist(), .cpu(), printing or branching on a tensor value), "
            "allocate with data-dependent sizes, or leave work on a side stream that never rejoins; "
            "timed with eager launches instead")


def _tensors_in(value) -> list:
    import torch
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    return []


def _check_replay_writes_outputs(graph, output, input_sets: Sequence[dict]) -> None:
    """Poison the captured call's floating-point outputs with NaN, replay, and require them overwritten.

    Kernels launched on a stream that is not part of the capture run once, eagerly, during capture and
    never in a replay: the graph would then time nothing. Outputs that alias an input are skipped (an
    in-place call would read its own poison).
    """
    import torch
    input_storages = {t.untyped_storage().data_ptr() for s in input_sets for t in _tensors_in(s)}
    outs = [t for t in _tensors_in(output)
            if t.is_cuda and t.is_floating_point() and t.numel() > 0
            and t.untyped_storage().data_ptr() not in input_storages]
    if not outs:
        return
    try:
        for t in outs:
            t.fill_(float("nan"))
    except RuntimeError:
        return  # a dtype without a NaN fill: nothing to check with
    graph.replay()
    torch.cuda.synchronize()
    if any(bool(torch.isnan(t.float()).all()) for t in outs):
        raise GraphCaptureError(
            "the CUDA graph replay did not write the call's output: its kernels ran outside the captured stream "
            "(a side stream that never waited on the current one, or another thread), so a graph replay would "
            "time nothing; launch on torch.cuda.current_stream(). Timed with eager launches instead")


def graph_samples(fn: Callable[[dict], Any], input_sets: Sequence[dict], *, reps: int, flush,
                  calls: int = CALLS_PER_GRAPH, keep: dict | None = None) -> list[float]:
    """Per-call seconds, one sample per replay pair. Raises GraphCaptureError when fn cannot be captured.

    Call warm_up first: compilation and autotuning cannot happen inside a capture. With `keep`, the timed
    graph and the output of its last call are left in it ("graph", "output"), so a caller can replay what
    was timed on new input values and check the result.
    """
    import torch
    calls = max(calls, len(input_sets))
    last_output: list = []

    def flush_and_calls():
        out = None
        for i in range(calls):
            write_flush(flush)
            out = fn(input_sets[i % len(input_sets)])
        last_output.append(out)   # only the last: earlier outputs' memory is reused within the graph

    def flush_only():
        for _ in range(calls):
            write_flush(flush)

    reject_host_sync(fn, input_sets[0])
    g_with = capture(flush_and_calls)
    g_without = capture(flush_only)
    _check_replay_writes_outputs(g_with, last_output[0], input_sets)

    # One timed pair to size the run, then the run itself, under the GPU's lock (gpu_lock.py; off unless set).
    with gpu_lock.exclusive(torch.cuda.current_device()):
        probe = _timed_replays(g_with, g_without, 1)
        n = replay_count(probe[0][0], reps, calls)
        pairs = _timed_replays(g_with, g_without, n)
    if keep is not None:
        # calls: an operator that writes an argument in place wrote the last call's input set this many times
        n_sets = len(input_sets)
        keep.update(graph=g_with, output=last_output[0], calls=calls,
                    calls_on_set=sum(1 for i in range(calls) if i % n_sets == (calls - 1) % n_sets))
    return per_call_samples([w for w, _ in pairs], [wo for _, wo in pairs], calls)


def _timed_replays(g_with, g_without, n: int) -> list[tuple[float, float]]:
    """n alternating replays of g_with and g_without (timed_pairs)."""
    return timed_pairs([g_with] * n, g_without)


def timed_pairs(graphs: Sequence, g_without) -> list[tuple[float, float]]:
    """(seconds of graphs[j]'s replay, seconds of the g_without replay after it) for each j: one flush-only
    replay first, so every timed replay follows one, then each graph and a flush-only replay, alternately. All
    of it is queued before the GPU starts it (held_batch), so no host delay falls inside a timed interval.

    A device-wide synchronize brackets the whole batch; per-replay synchronization is not needed because
    a graph replay completes only when every node of the graph, on every forked stream, has completed.
    """
    import torch
    events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * len(graphs) + 1)]

    def queue():
        g_without.replay()
        events[0].record()
        for j, g in enumerate(graphs):
            g.replay()
            events[2 * j + 1].record()
            g_without.replay()
            events[2 * j + 2].record()
    cuda_held_batch(queue, events[0], ops=4 * len(graphs) + 2)
    return [(events[2 * j].elapsed_time(events[2 * j + 1]) / 1e3,
             events[2 * j + 1].elapsed_time(events[2 * j + 2]) / 1e3) for j in range(len(graphs))]


# ---------------------------------------------------------------- the hold before a timed batch

HOLD_STATS = {"batches": 0, "held": 0, "retried": 0, "unheld": 0}


def held_batch(queue: Callable[[], Any], *, hold: Callable[[float], Any] | None, started: Callable[[], bool],
               sync: Callable[[], Any], ops: int, stats: dict | None = None) -> bool:
    """Queue a timed batch behind a hold and say whether the hold covered it (pure policy: the CUDA calls come in).

    hold(seconds) makes the GPU wait that long before what is queued next; queue() records the batch's first
    event and everything after it; started() says whether the GPU has reached that first event. If it has by
    the time the host has queued the whole batch, the host was slower than the hold (a descheduled thread, a
    busy host) and the GPU may have idled inside an interval: the batch runs again behind a HOLD_GROWTH times
    longer hold, HOLD_TRIES times in all; after that its last run stands and is counted as unheld.
    stats (HOLD_STATS by default) counts batches, those held (at the first try or a later one), retried, unheld.
    hold=None (a torch without torch.cuda._sleep): the batch runs once, unheld, as every batch did before holds.
    The GPU's lock (gpu_lock.py) is not taken here: the callers hold it for their whole timed phase
    (graph_samples, the A/B rounds).
    """
    stats = HOLD_STATS if stats is None else stats
    stats["batches"] += 1
    if hold is None:
        sync()
        queue()
        sync()
        stats["unheld"] += 1
        return False
    seconds = HOLD_FIXED_S + HOLD_PER_OP_S * max(ops, 0)
    for attempt in range(HOLD_TRIES):
        sync()
        hold(seconds)
        queue()
        covered = not started()
        sync()
        if covered:
            stats["held"] += 1
            stats["retried"] += attempt > 0
            return True
        seconds *= HOLD_GROWTH
    stats["retried"] += 1
    stats["unheld"] += 1
    return False


def take_hold_stats() -> dict:
    """HOLD_STATS and the GPU lock's counts (gpu_lock.STATS) since the last call (a worker's reply carries
    them), and reset."""
    out = dict(HOLD_STATS)
    for k in HOLD_STATS:
        HOLD_STATS[k] = 0
    out.update(gpu_lock.take_stats())
    return out


def _gpu_hold(seconds: float) -> None:
    import torch
    torch.cuda._sleep(max(1, int(seconds * HOLD_CYCLES_PER_S)))


def cuda_held_batch(queue: Callable[[], Any], first_event, *, ops: int) -> bool:
    """held_batch on the current CUDA stream: first_event is the batch's first event (queue records it)."""
    import torch
    hold = _gpu_hold if HOLD_ENABLED and hasattr(torch.cuda, "_sleep") else None
    return held_batch(queue, hold=hold, started=first_event.query, sync=torch.cuda.synchronize, ops=ops)


def eager_samples(fn: Callable[[dict], Any], input_sets: Sequence[dict], *, reps: int, flush) -> list[float]:
    """Per-call seconds with ordinary launches, L2 flushed before each call.

    The end event is recorded after a device-wide synchronize, so work the call left on any stream counts;
    the fixed cost of that synchronize + record (timed the same way around nothing) is subtracted.
    The flush is finished before the start event, so it is never inside the interval. The calls hold the
    GPU's lock (gpu_lock.py; off unless set), as a graph's timed replays do.
    """
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    raw, empty = [], []
    with gpu_lock.exclusive(torch.cuda.current_device()):
        for i in range(max(reps, 1)):
            write_flush(flush)
            torch.cuda.synchronize()
            start.record()
            fn(input_sets[i % len(input_sets)])
            torch.cuda.synchronize()
            end.record()
            torch.cuda.synchronize()
            raw.append(start.elapsed_time(end) / 1e3)
            start.record()
            torch.cuda.synchronize()
            end.record()
            torch.cuda.synchronize()
            empty.append(start.elapsed_time(end) / 1e3)
    overhead = median(empty)
    return [t - overhead for t in raw]


def pdl_available() -> bool:
    """Whether this GPU has programmatic dependent launch (compute capability 9 and later)."""
    import torch
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def floor_parts_s(reps: int = 50, flush_bytes: int = FLUSH_BYTES) -> dict[str, float | None]:
    """The floor kernel's time launched plainly and under PDL (None without PDL, or should its launch fail),
    in seconds: the score's floor is the lesser, and both are kept so a run's trail can say which one moved
    (agent/run_floor.py: processes of one run read 0.98-1.66 us)."""
    plain = measure_floor_s(reps, flush_bytes, pdl=False)
    if not pdl_available():
        return {"plain": plain, "pdl": None}
    try:
        return {"plain": plain, "pdl": measure_floor_s(reps, flush_bytes, pdl=True)}
    except Exception:  # noqa: BLE001 - a triton or driver without PDL: the plain floor
        return {"plain": plain, "pdl": None}


def lesser_floor(parts: dict[str, float | None]) -> float:
    """The score's floor from floor_parts_s's two launches: the lesser one measured."""
    return min(t for t in parts.values() if t is not None)


def measure_floor_s(reps: int = 50, flush_bytes: int = FLUSH_BYTES, pdl: bool | None = None) -> float:
    """T_floor in seconds: the floor kernel timed exactly as a candidate is (graph replay, L2 cold, median).
    pdl=False: launched plainly; True: with programmatic dependent launch (floor_call_pdl); None (the score's):
    the lesser of the two where the GPU has PDL, since a kernel that uses it (POLICY 7a) may start before the
    kernel ahead of it ends, and the floor is the least time any kernel can take here. Should the PDL launch
    fail, the plain floor stands."""
    if pdl is None:
        return lesser_floor(floor_parts_s(reps, flush_bytes))
    call = floor_call_pdl if pdl else floor_call
    sets = floor_input_sets()
    flush = make_flush_buffer(flush_bytes)
    warm_up(call, sets, 5)
    return median(graph_samples(call, sets, reps=reps, flush=flush))
