"""Helpers the operator folders share to make inputs and describe sizes (torch imported here).

Realistic activations: N(0, 1) with a few outlier channels 20-100x larger, as real LLM activations
have; they are what exposes a kernel that accumulates in fp16.
"""
from __future__ import annotations

import torch

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def torch_dtype(op: str, dtype: str) -> torch.dtype:
    if dtype not in TORCH_DTYPES:
        raise ValueError(f"{op}: dtype {dtype!r} is not supported; use one of {sorted(TORCH_DTYPES)}")
    return TORCH_DTYPES[dtype]


def outlier_activations(rows: int, cols: int, gen: torch.Generator, device, share: float,
                        scale: tuple[float, float]) -> torch.Tensor:
    """fp32 N(0,1) [rows, cols] with max(1, round(share * cols)) channels scaled by a factor in `scale`."""
    x = torch.randn(rows, cols, generator=gen, device=device, dtype=torch.float32)
    n_out = max(1, round(share * cols))
    channels = torch.randperm(cols, generator=gen, device=device)[:n_out]
    lo, hi = scale
    x[:, channels] *= lo + (hi - lo) * torch.rand(n_out, generator=gen, device=device, dtype=torch.float32)
    return x


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def not_pow2(n: int) -> int:
    """n itself if it is not a power of two, else the nearest larger number that is not."""
    return n if not is_pow2(n) else (3 if n == 1 else n + 1)
