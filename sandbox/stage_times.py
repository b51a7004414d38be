"""Where the wall time of one evaluation goes, stage by stage.

The parent times each stage around its conversation with the worker; the worker adds what only it can
see (its imports, its CUDA start-up, the compile of each kernel specialization, graph vs eager timing)
as `stage_s` in its replies. The result is frozen into `EvalResult.stage_times`: a tuple of
(stage, seconds) pairs in the order the stages first ran, JSON-able as a list of pairs. Stages that
run several times (one per shape) add up.

A name with "/" is a part of the stage before the slash (`holdouts/worker.call`: the candidate's calls
inside the hold-out stage, seen from the worker; `references/reference`: the parent's reference runs),
as `compile.kernel.*` is a part of `compile.gate`: listed under it, never added to the total.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterable, Iterator

# The order `aka bench -v` prints (stages not listed here follow in the order they ran).
ORDER = ("worker_start", "imports", "cuda_init", "profiler_init", "digest_compile", "worker_wait", "setup", "lint",
         "compile_ahead", "compile.first_run", "compile.gate", "compile.pipe", "references", "correctness", "holdouts",
         "dsl", "floor", "timing.inputs", "timing.graph", "timing.eager", "recheck", "counters", "remeasure", "teardown")


class StageClock:
    """Accumulates seconds per stage during one evaluation (parent side, and the A/B worker's steps of a
    shape; not thread-safe)."""

    def __init__(self) -> None:
        self._s: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        if seconds < 0 or seconds != seconds:
            raise ValueError(f"stage {stage!r}: {seconds} s is not a duration")
        self._s[stage] = self._s.get(stage, 0.0) + float(seconds)

    def get(self, stage: str) -> float:
        return self._s.get(stage, 0.0)

    def merge(self, stage_s: dict | None, prefix: str = "") -> float:
        """Add a worker's {stage: seconds}; returns their sum (to subtract from the enclosing stage)."""
        total = 0.0
        for k, v in (stage_s or {}).items():
            v = float(v)
            if v >= 0:
                self.add(prefix + str(k), v)
                total += v
        return total

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - t0)

    def freeze(self) -> tuple[tuple[str, float], ...]:
        return tuple((k, round(v, 4)) for k, v in self._s.items())


def is_part(name: str) -> bool:
    """A part of another stage (a kernel's compile, a sub-stage after "/"): not added to the total."""
    return ".kernel." in name or "/" in name


def _whole(name: str) -> str:
    if "/" in name:
        return name.split("/")[0]
    return name.split(".kernel.")[0] + (".gate" if ".kernel." in name else "")


def ordered(stage_times: Iterable) -> list[tuple[str, float]]:
    """(stage, seconds) in ORDER first, each stage's parts right after it (compile.kernel.* after
    compile.gate, `holdouts/...` after holdouts), then the rest as they ran."""
    pairs = [(str(k), float(v)) for k, v in stage_times]
    first_seen: dict[str, int] = {}
    for i, (name, _) in enumerate(pairs):
        first_seen.setdefault(_whole(name), i)

    def rank(item: tuple[int, tuple[str, float]]):
        i, (name, _) = item
        base = _whole(name)
        return (ORDER.index(base) if base in ORDER else len(ORDER), first_seen[base], is_part(name), i)

    return [p for _, p in sorted(enumerate(pairs), key=rank)]


def breakdown_lines(stage_times: Iterable, wall_s: float | None) -> list[str]:
    """Plain-text table: stage, seconds, share of the evaluation's wall time (parts of a stage, such as
    kernel compiles, are listed under it and not added to the total)."""
    rows = ordered(stage_times)
    if not rows:
        return ["no stage times recorded"]
    width = max(len(k) for k, _ in rows)
    lines = []
    for k, v in rows:
        share = f"{100 * v / wall_s:5.1f}%" if wall_s else ""
        lines.append(f"  {k:<{width}}  {v:8.3f} s  {share}")
    counted = sum(v for k, v in rows if not is_part(k))
    if wall_s:
        lines.append(f"  {'(other)':<{width}}  {max(0.0, wall_s - counted):8.3f} s")
        lines.append(f"  {'total wall':<{width}}  {wall_s:8.3f} s")
    return lines
