"""How long one candidate call takes on the GPU, and whose kernels spent that time.

T (DESIGN.md section 3) is the per-call GPU time inside a CUDA graph with L2 cold and input sets rotated,
the median of many repetitions; the eager-launch time is reported beside it, and is the fallback when
the call cannot be captured (the reason is kept). The mechanics live in benchmarks/gpu_timer.py so that
`aka calibrate` times the latency floor exactly the same way. `dsl_share` asks the profiler (CUPTI) how
much of the GPU time went to the candidate's own @triton.jit kernels.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from benchmarks import gpu_timer
from benchmarks.gpu_timer import median, spread

# Chrome-trace categories of GPU activity in torch.profiler's export; everything else is host side.
GPU_ACTIVITY_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
# Triton before 3.0 suffixed kernel names with the argument specialization ("_add_kernel_0d1d2de").
_LEGACY_TRITON_SUFFIX = re.compile(r"_\d[0-9cde]*")


@dataclass(frozen=True)
class TimingResult:
    t_graph_s: float | None      # per-call GPU time, CUDA-graph replay, L2 cold, median; None if capture failed
    t_eager_s: float             # per-call time with eager launches, L2 cold, median
    graph_error: str | None      # why the graph could not be captured
    samples: int                 # scored samples (graph replay pairs, or eager calls when graphs failed)
    spread: float                # (p75 - p25) / median of the scored samples: noise estimate
    stage_s: tuple[tuple[str, float], ...] = ()   # wall time of warm-up+graph and of eager timing

    @property
    def t_s(self) -> float:
        """The time that is scored: graph replay when it could be captured, else eager."""
        return self.t_graph_s if self.t_graph_s is not None else self.t_eager_s

    @property
    def mode(self) -> str:
        return "graph" if self.t_graph_s is not None else "eager"


def summarize(graph: list[float] | None, eager: list[float], graph_error: str | None) -> TimingResult:
    """TimingResult from raw per-call samples in seconds (pure: the statistics are tested on the CPU)."""
    if not eager:
        raise ValueError("no eager samples; time at least one repetition")
    scored = graph if graph else eager
    return TimingResult(t_graph_s=median(graph) if graph else None, t_eager_s=max(median(eager), 0.0),
                        graph_error=graph_error, samples=len(scored), spread=spread(scored))


def time_call(fn: Callable[[dict], Any], input_sets: list[dict], *, reps: int = 50, warmup: int = 5,
              flush_bytes: int = gpu_timer.FLUSH_BYTES) -> TimingResult:
    """Time fn(inputs) with input sets rotated and L2 flushed before every call.

    About reps calls are timed each way (graph and eager), plus ~20 ms of replays for tiny calls.
    """
    if not input_sets:
        raise ValueError("time_call got 0 input sets; pass several (e.g. 4) so caches cannot hold the inputs")
    if reps < 1:
        raise ValueError(f"reps={reps} must be >= 1 (50 is the default)")
    t0 = time.monotonic()
    flush = gpu_timer.make_flush_buffer(flush_bytes)
    gpu_timer.warm_up(fn, input_sets, warmup)
    graph, graph_error = None, None
    try:
        graph = gpu_timer.graph_samples(fn, input_sets, reps=reps, flush=flush)
    except gpu_timer.GraphCaptureError as exc:
        graph_error = str(exc)
    t1 = time.monotonic()
    eager = gpu_timer.eager_samples(fn, input_sets, reps=reps, flush=flush)
    stages = (("timing.graph", t1 - t0), ("timing.eager", time.monotonic() - t1))
    return dataclasses.replace(summarize(graph, eager, graph_error), stage_s=stages)


def measure_floor(reps: int = 50) -> float:
    """T_floor in seconds: one launch that reads one value from cold memory and writes one, timed like
    time_call (graph replay, L2 cold, median). No implementation that reads its input can beat it."""
    return gpu_timer.measure_floor_s(reps)


# ---------------------------------------------------------------- profiler attribution

def is_candidate_kernel(name: str, kernel_names: Iterable[str]) -> bool:
    """Triton names the CUDA kernel after its @triton.jit function. Exact match, or the pre-3.0 signature
    suffix; never a bare prefix (a jit function named "sm90" must not claim cuBLAS's "sm90_xmma_gemm_...")."""
    for k in kernel_names:
        if name == k or (name.startswith(k) and _LEGACY_TRITON_SUFFIX.fullmatch(name[len(k):])):
            return True
    return False


def gpu_times_from_trace(trace: dict | list) -> dict[str, float]:
    """Total µs per GPU activity name (kernels, memcpy, memset) in a torch.profiler chrome trace."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    totals: dict[str, float] = {}
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        if str(ev.get("cat", "")).lower() not in GPU_ACTIVITY_CATEGORIES:
            continue
        name = str(ev.get("name", "?"))
        totals[name] = totals.get(name, 0.0) + float(ev.get("dur", 0.0))
    return totals


def candidate_share(times_us: dict[str, float], kernel_names: Iterable[str]) -> float:
    """Share of all GPU time spent in the candidate's own kernels (0 when nothing ran on the GPU)."""
    names = set(kernel_names)
    total = sum(times_us.values())
    if total <= 0.0:
        return 0.0
    return sum(t for n, t in times_us.items() if is_candidate_kernel(n, names)) / total


def dsl_share(fn: Callable[[dict], Any], inputs: dict, kernel_names: set[str], runs: int = 3
              ) -> tuple[float, dict[str, float]]:
    """(share of GPU time in the candidate's @triton.jit kernels, {kernel name: total µs over `runs` calls}).

    Memsets and memcpys count as GPU time that is not the candidate's. One unprofiled call first, so
    compilation and autotuning stay out of the profile.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn(inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(max(runs, 1)):
            fn(inputs)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="aka-trace-") as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    times = gpu_times_from_trace(trace)
    return candidate_share(times, kernel_names), times
