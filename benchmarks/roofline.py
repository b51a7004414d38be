"""Roofline time of one shape: T_roof = max(sum_dtype W[dtype] / peak[dtype], Q / bandwidth)."""
from __future__ import annotations

from dataclasses import dataclass

from benchmarks.hardware import Hardware


@dataclass(frozen=True)
class Roofline:
    t_compute_s: float
    t_memory_s: float

    @property
    def t_roof_s(self) -> float:
        return max(self.t_compute_s, self.t_memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.t_compute_s > self.t_memory_s else "memory"

    @property
    def intensity_ratio(self) -> float:
        """t_compute / t_memory: above 1 the shape is compute-bound."""
        return self.t_compute_s / self.t_memory_s if self.t_memory_s else float("inf")


def roofline(W: dict[str, float], Q: float, hw: Hardware) -> Roofline:
    t_c = 0.0
    for dtype, flops in W.items():
        if flops <= 0:
            continue
        t_c += flops / hw.peak_flops(dtype)
    return Roofline(t_compute_s=t_c, t_memory_s=Q / hw.bandwidth_bytes_s)


def t_roof(W: dict[str, float], Q: float, hw: Hardware) -> float:
    return roofline(W, Q, hw).t_roof_s
