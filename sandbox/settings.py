"""The sandbox's own settings: how strictly and how fast every evaluation of a run is judged.

One frozen object, shared by every evaluation of a run. `agent.config.SandboxConfig` is this class (the
config loader reads its fields and their docstrings), so a YAML key `sandbox.trials` reaches the worker
through exactly one conversion: none. What differs between two evaluations of one run (which kernel,
which shapes, timing or correctness only) is in `sandbox.evaluation.EvalRequest`, not here.
"""
from __future__ import annotations

from dataclasses import dataclass

# A pre-started GPU worker's start-up stages (sandbox/worker.py warm_gpu), in the order they run; the CUDA context
# always comes first, whichever others are asked for.
WARM_STAGES = ("cuda_init", "profiler_init", "digest_compile")


@dataclass(frozen=True)
class SandboxSettings:
    timeout_s: float = 900.0
    """Wall-clock limit of one evaluation; the worker's whole process group is killed past it."""
    trials: int = 3
    """Correctness trials per visible shape, each with fresh random inputs re-filled into the same buffers."""
    holdout: bool = True
    """Also check hidden hold-out shapes that no proposer is shown."""
    holdout_trials: int = 1
    """Correctness trials per hidden hold-out shape. One is enough for what hold-outs catch (kernels
    special-cased to the visible shapes); stale results cached by pointer are caught on the visible shapes'
    re-filled trials. Each hold-out trial still has fresh inputs and poisoned outputs."""
    dsl_threshold: float = 0.9
    """Minimum share of GPU time spent in the candidate's own @triton.jit kernels."""
    gpu_memory_fraction: float = 0.9
    """Cap on the worker's share of GPU memory."""
    counters: bool = False
    """Collect Nsight Compute counters for the top-weighted shapes in full evaluations (slow: minutes)."""
    counter_shapes: int = 2
    """How many top-weighted shapes ncu profiles."""
    require_features: tuple[str, ...] = ()
    """Architecture features the compiled kernel must use, e.g. ("wgmma",)."""
    network_namespace: bool = True
    """Run the worker in a new network namespace (unshare -n) where Linux allows it."""
    prestart: bool = True
    """Start the next worker (imports done, CUDA context up) while the current evaluation runs. Every
    candidate still gets a fresh process; a started worker has run no candidate code."""
    fork_server: bool = True
    """Fork interpreter workers (and their compile children) from a per-process server that has imported
    torch (sandbox/zygote.py) instead of spawning them: 2.4 s of CPU less per process on the 2-core host,
    where that start-up was most of an evaluation. Each evaluation still gets a fresh process that has run
    no candidate code. GPU workers are always spawned (and pre-started)."""
    gpu_spares: int = 4
    """GPU workers kept started ahead (sandbox/prestart.py): one took 8 s to get ready on the H200 and a
    timing-only screen 1.1-1.5 s, so with two spares a 5-GPU-minute silu_and_mul run spent 103 of its 235
    evaluation seconds waiting for a worker. Each spare holds a CUDA context and a few host cores while it
    starts."""
    gpu_warm_stages: tuple[str, ...] = WARM_STAGES
    """What a spare GPU worker does before it is handed a candidate, besides the CUDA context (always): the
    profiler's CUPTI start-up (profiler_init: 5.4 s on the H200, otherwise paid by the first evaluation that
    profiles) and the input digests' kernel (digest_compile). A spare runs them while another worker times its
    kernels (benchmarks/gpu_lock.py says what that did to the timed floor). [] moved those start-ups into the
    evaluations and bought no stiller floor: 7.56 s a candidate against 1.39 s, the floors 1.34-1.62 us against
    1.06-1.69 (one search each on an H100, session 40)."""
    compile_cache: bool = True
    """One Triton cache directory per candidate source (sha256), shared by the evaluations of that source
    in a run and sealed after its first evaluation (sandbox/compile_cache.py); off: the worker's private
    home, nothing shared."""
    compile_in_worker: bool = True
    """On a GPU, run the compile gate inside the worker (it is already the sandboxed process) instead of
    a second child process that imports torch and triton again. The interpreter always uses the child."""
    output_slot: bool = True
    """Trial outputs travel from the worker in a shared-memory file (sandbox/output_slot.py) instead of the
    result pipe: gemm's 235 MB outputs took 5.8 s of a 20 s evaluation through the pipe on the H200."""
    compile_ahead: bool = True
    """On a GPU, before a candidate's trials the worker compiles the kernel specializations every visible
    shape (and, before the hold-outs, every hold-out shape) will need, in parallel forked processes
    (sandbox/compile_ahead.py): Triton otherwise compiles each at its first call, one after another, and
    those compiles were most of a fused_moe candidate's evaluation on the H200. Best effort, never a gate."""
    compile_ahead_jobs: int = 0
    """Processes for compile_ahead; 0: the host's cores less one, at most 16."""
    ab_rounds: int = 30
    """Rounds of an A/B re-measure in one worker: each round times both kernels (A B, then B A) on every
    shape, one CUDA-graph replay pair each, L2 flushed."""

    def validate(self) -> None:
        """Raise ValueError naming the value, the limit and a fix."""
        if self.trials < 1:
            raise ValueError(f"sandbox.trials={self.trials}: at least 1 correctness trial per shape is needed "
                             f"(3 is the default)")
        if self.gpu_spares < 1:
            raise ValueError(f"sandbox.gpu_spares={self.gpu_spares}: at least 1 (4 is the default; turn "
                             f"pre-starting off with sandbox.prestart=false)")
        unknown = sorted(set(self.gpu_warm_stages) - set(WARM_STAGES))
        if unknown:
            raise ValueError(f"sandbox.gpu_warm_stages={list(self.gpu_warm_stages)}: {unknown} not among "
                             f"{list(WARM_STAGES)}; give a subset of them ([] for the CUDA context only)")
        if self.holdout_trials < 1:
            raise ValueError(f"sandbox.holdout_trials={self.holdout_trials}: at least 1 (the default)")
        if not 0 < self.gpu_memory_fraction <= 1:
            raise ValueError(f"sandbox.gpu_memory_fraction={self.gpu_memory_fraction} must be in (0, 1]")
        if self.timeout_s <= 0:
            raise ValueError(f"sandbox.timeout_s={self.timeout_s} must be positive")
        if not 0 <= self.dsl_threshold <= 1:
            raise ValueError(f"sandbox.dsl_threshold={self.dsl_threshold} must be a share in [0, 1] (0.9 is the "
                             f"default)")
        if not 0 <= self.compile_ahead_jobs <= 64:
            raise ValueError(f"sandbox.compile_ahead_jobs={self.compile_ahead_jobs}: give 0 (the host's cores less "
                             f"one) to 64, or turn the pass off with sandbox.compile_ahead=false")
        if self.ab_rounds < 4:
            raise ValueError(f"sandbox.ab_rounds={self.ab_rounds}: the paired test needs at least 4 rounds "
                             f"(30 is the default)")
