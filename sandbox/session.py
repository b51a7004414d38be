"""A run's sandbox: the settings, the pre-started workers and the compile cache its evaluations share.

    with Sandbox(settings) as sb:
        result = sb(request)                     # sandbox.evaluate with the run's pool and cache
        series = sb.measure_ab(request_a, source_b)   # both kernels in one worker (sandbox/ab.py)
        checks = sb.precompile(op, sources)      # lint + Hopper compile on CPU workers, in parallel

It is what the loop is handed as its evaluator: calling it is evaluating. Nothing here decides a verdict;
it only keeps the run's resources alive between evaluations and closes them at the end.
"""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from sandbox.compile_cache import CompileCache
from sandbox.evaluation import EvalRequest, evaluate
from sandbox.prestart import WorkerPool
from sandbox.settings import SandboxSettings
from sandbox.verdict import EvalResult

PRECOMPILE_WORKERS = 2      # CPU worker processes compiling at once (the GPU machine has 16 cores)


class Sandbox:
    def __init__(self, settings: SandboxSettings = SandboxSettings(), *, cache_dir: str | Path | None = None,
                 operator_dir: str | None = None):
        settings.validate()
        self.settings, self.operator_dir = settings, operator_dir
        self.pool = WorkerPool(prestart=settings.prestart, gpu_spares=settings.gpu_spares,
                               fork_server=settings.fork_server, gpu_warm_stages=settings.gpu_warm_stages)
        self.cache = CompileCache(cache_dir) if settings.compile_cache else None

    def __call__(self, req: EvalRequest, **options) -> EvalResult:
        """sandbox.evaluate with the run's pool and cache; other keyword options pass through."""
        if req.settings != self.settings:
            req = dataclasses.replace(req, settings=self.settings)   # one run, one set of rules
        return evaluate(req, operator_dir=self.operator_dir, pool=self.pool, cache=self.cache, **options)

    evaluate = __call__

    def measure_ab(self, req: EvalRequest, other_source: str):
        """Time `req.source` (A) and `other_source` (B) interleaved in one fresh worker (sandbox/ab.py)."""
        from sandbox.ab import measure_ab
        req = dataclasses.replace(req, settings=self.settings)
        return measure_ab(req, other_source, operator_dir=self.operator_dir, pool=self.pool, cache=self.cache)

    def precompile(self, op: str, sources: Sequence[str], shapes=None) -> list[EvalResult]:
        """Lint and compile gates of each source on CPU (interpreter) workers, PRECOMPILE_WORKERS at a time,
        while the GPU is busy with another evaluation. Each compiles into its own source's cache directory
        (so a later GPU evaluation of the same source may find its Hopper kernels there). Returns one
        compile-only EvalResult per source, in order."""
        def one(source: str) -> EvalResult:
            req = compile_only_request(op, source, shapes, self.settings, self.operator_dir)
            return evaluate(req, operator_dir=self.operator_dir, cache=self.cache)

        with ThreadPoolExecutor(max_workers=PRECOMPILE_WORKERS) as ex:
            return list(ex.map(one, sources))

    def close(self) -> None:
        self.pool.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def compile_only_request(op: str, source: str, shapes=None, settings: SandboxSettings = SandboxSettings(),
                         operator_dir: str | None = None) -> EvalRequest:
    """Lint and compile gates only, on a CPU (interpreter) worker, at `shapes` (default: the operator's
    first shape). The one definition of a pre-compile, for Sandbox.precompile and the search prefetch."""
    from benchmarks.hardware import load_hardware
    from sandbox.correctness import load_spec
    chosen = tuple(shapes or load_spec(op, operator_dir).shapes[:1])
    if not chosen:
        raise ValueError(f"operator {op} has no shapes to compile at; pass shapes=")
    quick = dataclasses.replace(settings, trials=1, holdout=False, prestart=False)
    return EvalRequest(op=op, source=source, shapes=chosen, hardware=load_hardware("h200"), settings=quick,
                       timing=False, correctness=False, interpreter=True)    # compile-only: ceilings unused
