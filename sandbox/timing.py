"""How long one candidate call takes on the GPU, and whose kernels spent that time.

T (DESIGN.md section 3) is the per-call GPU time inside a CUDA graph with L2 cold and input sets rotated,
the median of many repetitions; the eager-launch time is reported beside it, and is the fallback when
the call cannot be captured (the reason is kept). The mechanics live in benchmarks/gpu_timer.py so that
`aka calibrate` times the latency floor exactly the same way. `dsl_attribution` asks the profiler (CUPTI) how
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
    t_eager_s: float | None      # per-call time with eager launches, L2 cold, median; None: not timed (eager=False)
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
    """TimingResult from raw per-call samples in seconds (pure: the statistics are tested on the CPU). `eager`
    may be empty only when there are graph samples (eager timing skipped, see time_call)."""
    if not eager and not graph:
        raise ValueError("no eager samples and no graph samples; time at least one repetition")
    scored = graph if graph else eager
    return TimingResult(t_graph_s=median(graph) if graph else None,
                        t_eager_s=max(median(eager), 0.0) if eager else None,
                        graph_error=graph_error, samples=len(scored), spread=spread(scored))


def time_call(fn: Callable[[dict], Any], input_sets: list[dict], *, reps: int = 50, warmup: int = 5,
              flush_bytes: int = gpu_timer.FLUSH_BYTES, keep: dict | None = None, eager: bool = True) -> TimingResult:
    """Time fn(inputs) with input sets rotated and L2 flushed before every call.

    About reps calls are timed each way (graph and eager), plus ~20 ms of replays for tiny calls. With
    `keep`, the timed graph and its last output are left in it (see replay_on_fresh_inputs). eager=False
    times eager launches only when the graph could not be captured (the score never reads the eager time
    of a captured call; a timing-only screen spent 14% of its GPU time on it).
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
        graph = gpu_timer.graph_samples(fn, input_sets, reps=reps, flush=flush, keep=keep)
    except gpu_timer.GraphCaptureError as exc:
        graph_error = str(exc)
    t1 = time.monotonic()
    eager_samples = (gpu_timer.eager_samples(fn, input_sets, reps=reps, flush=flush)
                     if eager or not graph else [])
    stages = (("timing.graph", t1 - t0), ("timing.eager", time.monotonic() - t1))
    return dataclasses.replace(summarize(graph, eager_samples, graph_error), stage_s=stages)


def refill_inputs(input_sets: list[dict], fresh: dict) -> str | None:
    """Copy `fresh` values into every captured input set's tensors, in place (the graph reads those
    addresses). Returns why that cannot stand for a call on `fresh` (None when it can): a non-tensor
    argument baked into the capture that differs, or a tensor whose shape or dtype differs."""
    import torch
    for inputs in input_sets:
        for k, v in fresh.items():
            old = inputs.get(k)
            if isinstance(v, torch.Tensor):
                if not isinstance(old, torch.Tensor) or old.shape != v.shape or old.dtype != v.dtype:
                    return f"input {k!r} of the fresh set does not match the captured one"
            elif old != v:
                return f"non-tensor input {k!r} differs between seeds ({old!r} vs {v!r}): baked into the capture"
    for inputs in input_sets:
        for k, v in fresh.items():
            if isinstance(v, torch.Tensor):
                inputs[k].copy_(v)
    return None


def replay_on_fresh_inputs(kept: dict, input_sets: list[dict], fresh: dict, mutates: tuple[str, ...] = (),
                           n_outputs: int | None = None):
    """(the timed graph's result after one replay on `fresh` values, None) or (None, why not). The result is
    a list: the last call's outputs (one tensor, or the `n_outputs` of its tuple), then the `mutates`
    arguments of the input set that call wrote (kept["calls_on_set"] says how often the graph calls it).

    What is timed must be what was checked: a candidate that behaves differently while it is captured
    (a call counter, stream-capture detection, work skipped after the first calls) gives a graph whose
    replay computes something else. The outputs are poisoned first, so a replay that writes nothing shows."""
    import torch
    graph, out = kept.get("graph"), kept.get("output")
    if graph is None:
        return None, "no CUDA graph was captured (timed eagerly)"
    if n_outputs is None:
        outs = [out]
    elif n_outputs == 0 and out is None:
        outs = []
    elif type(out) is tuple and len(out) == n_outputs:
        outs = list(out)
    else:
        return None, f"the captured call returned {type(out).__name__}, not the operator's {n_outputs} outputs"
    for t in outs:
        if type(t) is not torch.Tensor or not t.is_cuda:
            return None, f"the captured call returned {type(t).__name__}, not a CUDA tensor"
    why = refill_inputs(input_sets, fresh)
    if why:
        return None, why
    from sandbox.correctness import POISON_BYTE
    for t in outs:     # as poisoned allocations: NaN in floats, -1 in integers (expert ids, counts, slots)
        if t.is_contiguous():
            t.view(torch.uint8).fill_(POISON_BYTE)
        else:
            t.fill_(float("nan") if t.is_floating_point() else -1)
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()
    written = input_sets[(int(kept.get("calls", 1)) - 1) % len(input_sets)]
    return [t.detach().clone() for t in outs] + [written[m].detach().clone() for m in mutates], None


def measure_floor(reps: int = 50) -> float:
    """T_floor in seconds: one launch that reads one value from cold memory and writes one, timed like
    time_call (graph replay, L2 cold, median). No implementation that reads its input can beat it."""
    return gpu_timer.measure_floor_s(reps)


def measure_floor_parts(reps: int = 50) -> dict[str, float | None]:
    """The floor launched plainly and under PDL, seconds (benchmarks/gpu_timer.py floor_parts_s); T_floor is
    the lesser."""
    return gpu_timer.floor_parts_s(reps)


# ---------------------------------------------------------------- profiler attribution

def is_candidate_kernel(name: str, kernel_names: Iterable[str]) -> bool:
    """Triton names the CUDA kernel after its @triton.jit function. Exact match, or the pre-3.0 signature
    suffix; never a bare prefix (a jit function named "sm90" must not claim cuBLAS's "sm90_xmma_gemm_...")."""
    for k in kernel_names:
        if name == k or (name.startswith(k) and _LEGACY_TRITON_SUFFIX.fullmatch(name[len(k):])):
            return True
    return False


# Device work that cannot be the operator: it computes nothing from the inputs. Memsets, device-to-device
# and host-to-device copies (DMA transfers), and PyTorch's fill kernel (torch.zeros/full/fill_: writes one
# constant). A device-to-host copy is not neutral: the result would then be computed on the host.
NEUTRAL_CATEGORIES = ("gpu_memset", "gpu_memcpy")
NEUTRAL_KERNEL_MARKERS = ("FillFunctor",)
FOREIGN_MEMCPY_MARKERS = ("DtoH", "Device -> Host")
FOREIGN_COMPUTE_MAX_SHARE = 0.02   # of the call's compute time; above it the candidate is rejected at `dsl`


def gpu_activity_from_trace(trace: dict | list) -> dict[str, tuple[str, float]]:
    """{name: (category, total µs)} of the GPU activity (kernels, memcpy, memset) in a torch.profiler chrome trace."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    totals: dict[str, tuple[str, float]] = {}
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat not in GPU_ACTIVITY_CATEGORIES:
            continue
        name = str(ev.get("name", "?"))
        totals[name] = (cat, totals.get(name, (cat, 0.0))[1] + float(ev.get("dur", 0.0)))
    return totals


def gpu_times_from_trace(trace: dict | list) -> dict[str, float]:
    """Total µs per GPU activity name (kernels, memcpy, memset) in a torch.profiler chrome trace."""
    return {name: us for name, (_, us) in gpu_activity_from_trace(trace).items()}


def is_neutral(name: str, category: str) -> bool:
    """Device work that computes nothing from the inputs (see NEUTRAL_CATEGORIES)."""
    if category == "gpu_memcpy":
        return not any(m in name for m in FOREIGN_MEMCPY_MARKERS)
    return category == "gpu_memset" or any(m in name for m in NEUTRAL_KERNEL_MARKERS)


@dataclass(frozen=True)
class Attribution:
    """Whose device time one call spent: the candidate's own @triton.jit kernels, neutral work (memsets,
    copies, constant fills) and foreign compute (PyTorch or library kernels, device-to-host copies)."""

    own_us: float
    foreign_us: dict[str, float]
    neutral_us: dict[str, float]

    @property
    def compute_us(self) -> float:
        return self.own_us + sum(self.foreign_us.values())

    @property
    def own_share(self) -> float:
        """Share of the compute time (neutral work excluded) in the candidate's kernels; 0 when none ran."""
        return self.own_us / self.compute_us if self.compute_us > 0 else 0.0

    @property
    def foreign_share(self) -> float:
        return 1.0 - self.own_share if self.compute_us > 0 else 0.0

    def top_foreign(self, n: int = 3) -> list[tuple[str, float, float]]:
        """(name, µs, share of the compute time) of the largest foreign kernels."""
        total = self.compute_us or 1.0
        return [(k, us, us / total) for k, us in sorted(self.foreign_us.items(), key=lambda kv: -kv[1])[:n]]

    def to_json(self) -> dict[str, Any]:
        return {"own_us": self.own_us, "foreign_us": dict(self.foreign_us), "neutral_us": dict(self.neutral_us),
                "own_share": self.own_share, "foreign_share": self.foreign_share}


def attribute(activity: dict[str, tuple[str, float]], kernel_names: Iterable[str]) -> Attribution:
    """Split {name: (category, µs)} into own, foreign and neutral time. The candidate's names win: a jit
    function whose name contains a neutral marker is still the candidate's own kernel."""
    names = set(kernel_names)
    own, foreign, neutral = 0.0, {}, {}
    for name, (cat, us) in activity.items():
        if cat == "kernel" and is_candidate_kernel(name, names):
            own += us
        elif is_neutral(name, cat):
            neutral[name] = neutral.get(name, 0.0) + us
        else:
            foreign[name] = foreign.get(name, 0.0) + us
    return Attribution(own_us=own, foreign_us=foreign, neutral_us=neutral)


def dsl_attribution(fn: Callable[[dict], Any], inputs: dict, kernel_names: set[str], runs: int = 3) -> Attribution:
    """Whose device time `runs` profiled calls spent (see Attribution). One unprofiled call first, so
    compilation and autotuning stay out of the profile."""
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
    return attribute(gpu_activity_from_trace(trace), kernel_names)
