"""Budgets of a run: iterations, wall minutes, GPU minutes, tokens and USD.

GPU minutes are the summed wall time of the evaluations that ran on a GPU (interpreter runs use no
GPU and count 0). Usage is restored from the audit trail on --resume, so a resumed run spends what
is left, not a fresh allowance.
"""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

from agent.types import format_usd

DEFAULT_ITERATIONS = 20   # used when no budget at all is given, so a run always ends


@dataclass(frozen=True)
class BudgetLimits:
    iterations: int | None = None
    minutes: float | None = None
    gpu_minutes: float | None = None
    tokens: int | None = None
    usd: float | None = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None and v < 0:
                raise ValueError(f"budget {f.name}={v} is negative; give a limit >= 0 or leave it out")

    def with_default(self) -> "BudgetLimits":
        if all(getattr(self, f.name) is None for f in dataclasses.fields(self)):
            return dataclasses.replace(self, iterations=DEFAULT_ITERATIONS)
        return self

    def merged(self, newer: "BudgetLimits") -> "BudgetLimits":
        """These limits with every limit `newer` sets replacing ours (a resume may raise a budget)."""
        return BudgetLimits(**{f.name: getattr(newer, f.name) if getattr(newer, f.name) is not None
                               else getattr(self, f.name) for f in dataclasses.fields(self)})

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BudgetUsed:
    iterations: int = 0
    wall_s: float = 0.0
    gpu_s: float = 0.0
    tokens: int = 0
    usd: float = 0.0

    def plus(self, **delta) -> "BudgetUsed":
        return dataclasses.replace(self, **{k: getattr(self, k) + v for k, v in delta.items()})

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    def line(self, limits: BudgetLimits) -> str:
        def part(name: str, used: str, limit) -> str:
            return f"{name} {used}" + (f"/{limit:g}" if limit is not None else "")
        return ", ".join([
            part("iter", str(self.iterations), limits.iterations),
            part("min", f"{self.wall_s / 60:.1f}", limits.minutes),
            part("gpu-min", f"{self.gpu_s / 60:.2f}", limits.gpu_minutes),
            part("tokens", str(self.tokens), limits.tokens),
            part("usd", format_usd(self.usd).lstrip("$"), limits.usd),   # a fraction of a cent is not 0.00
        ])


def exhausted(limits: BudgetLimits, used: BudgetUsed) -> str | None:
    """The reason the run must stop, or None while every budget has room."""
    checks = (
        ("iterations", used.iterations, limits.iterations, "{:d}"),
        ("wall minutes", used.wall_s / 60, limits.minutes, "{:.2f}"),
        ("GPU minutes", used.gpu_s / 60, limits.gpu_minutes, "{:.2f}"),
        ("tokens", used.tokens, limits.tokens, "{:d}"),
        ("USD", used.usd, limits.usd, "{:.2f}"),
    )
    for name, value, limit, fmt in checks:
        if limit is not None and value >= limit:
            return f"{name} budget reached: used {fmt.format(value)} of {limit:g}"
    return None


def gpu_forecast_stop(limit_minutes: float | None, used_gpu_s: float, round_gpu_s: list[float]) -> str | None:
    """Stop before a round the GPU budget cannot hold: when less than half of a typical round's GPU time
    (the median of this run's rounds so far, two or more) is left. A round is never cut short (its
    evaluation would be lost), so without this a run of 110 s rounds (fused_moe from a badly tuned start
    on the H200) overran a 4.5 GPU-minute budget by 2.5 minutes; with it, the overrun is at most about half
    a round and the expected use is the budget."""
    if limit_minutes is None or len(round_gpu_s) < 2:
        return None
    left = limit_minutes * 60 - used_gpu_s
    typical = statistics.median(round_gpu_s)
    if 0 < left < typical / 2:
        return (f"GPU minutes budget nearly reached: {left / 60:.2f} of {limit_minutes:g} left, less than half of "
                f"this run's typical round ({typical / 60:.2f} GPU-minutes); stopped rather than overrun it")
    return None
