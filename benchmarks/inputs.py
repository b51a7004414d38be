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


def scale_down(n: int, limit: int, not_pow2_size: int) -> int:
    """n if it already fits; otherwise `limit` for powers of two and a non-power-of-two size for the rest
    (interpreter_dims keep a hot size's power-of-two-ness, which is what a kernel's masks depend on)."""
    if n <= limit:
        return n
    return limit if is_pow2(n) else not_pow2_size


def row_dims(op: str, dims, row: str = "T", col: str = "H") -> tuple[int, int]:
    """(rows, cols) of a row-wise operator's dims, both checked >= 1."""
    r, c = int(dims[row]), int(dims[col])
    if r < 1 or c < 1:
        raise ValueError(f"{op}: dims {row}={r}, {col}={c} must both be >= 1")
    return r, c


def row_interpreter_dims(dims, row: str = "T", col: str = "H", max_rows: int = 4,
                         max_cols: int = 256) -> dict[str, int]:
    """A row-wise operator's dims scaled down for the interpreter: at most `max_rows` rows (3, not a power
    of two, when the hot count is not one) and at most `max_cols` columns; 192 + cols % 64 stays in
    192..255, which holds no power of two, and keeps the column count's oddness."""
    r, c = int(dims[row]), int(dims[col])
    return {row: scale_down(r, max_rows, 3), col: scale_down(c, max_cols, 192 + c % 64)}


def row_holdout_dims(rng, hot_dims, row: str = "T", col: str = "H", default_cols: int = 4096,
                     max_rows: int | None = None) -> list[dict[str, int]]:
    """Four hidden shapes of a row-wise operator: a tiny odd row count with an odd width near a hot width, a
    row count that is not a power of two at a hot width, more rows than any hot shape (capped at
    `max_rows` where a huge row count would not fit one GPU), and an odd width wider than every hot one."""
    hot_r = sorted({int(d[row]) for d in hot_dims}) or [1, 64, 4096]
    hot_c = sorted({int(d[col]) for d in hot_dims}) or [default_cols]
    max_r, max_c = hot_r[-1], hot_c[-1]
    odd_near_hot = max((rng.choice(hot_c) - 2 * rng.randrange(1, 32)) | 1, 1)
    big_r = not_pow2(max_r + rng.randrange(1, max_r // 2 + 2))
    if max_rows is not None:
        big_r = not_pow2(min(big_r, max_rows))
    return [
        {row: rng.choice([3, 5, 7, 11, 13]), col: odd_near_hot},
        {row: not_pow2(rng.randrange(17, 2048)), col: rng.choice(hot_c)},
        {row: big_r, col: rng.choice(hot_c)},
        {row: rng.choice([1, 2, 5]), col: max_c + 2 * rng.randrange(1, 64) + 1},
    ]


def heads_interpreter_dims(dims, max_t: int = 4, max_hq: int = 4, max_hk: int = 2) -> dict[str, int]:
    """Dims {T, Hq, Hk, D} of a per-head q/k operator scaled down for the interpreter; D (64-256) is kept."""
    T, Hq, Hk, D = (int(dims[k]) for k in ("T", "Hq", "Hk", "D"))
    return {"T": scale_down(T, max_t, 3), "Hq": scale_down(Hq, max_hq, 3), "Hk": scale_down(Hk, max_hk, 1), "D": D}


def heads_holdout_dims(rng, hot_dims, odd_head_dims: tuple[int, ...], max_t: int) -> list[dict[str, int]]:
    """Four hidden {T, Hq, Hk, D} shapes of a per-head q/k operator: a few tokens with odd head counts and a
    head size from `odd_head_dims` (not powers of two); a token count that is not a power of two at hot heads;
    more tokens than any hot shape (capped at `max_t`); more query heads than any hot shape."""
    hot = [tuple(int(d[k]) for k in ("T", "Hq", "Hk", "D")) for d in hot_dims] or [(64, 32, 8, 128)]
    top_t, top_hq = max(h[0] for h in hot), max(h[1] for h in hot)
    _, hq, hk, d = rng.choice(hot)
    _, hq2, hk2, d2 = rng.choice(hot)
    big_t = not_pow2(min(top_t + rng.randrange(1, top_t // 2 + 2), max_t))
    return [
        {"T": rng.choice([3, 5, 7]), "Hq": rng.choice([5, 7, 9]), "Hk": rng.choice([1, 3]),
         "D": rng.choice(odd_head_dims)},
        {"T": not_pow2(rng.randrange(17, 2048)), "Hq": hq, "Hk": hk, "D": d},
        {"T": big_t, "Hq": hq2, "Hk": hk2, "D": d2},
        {"T": rng.choice([1, 2, 5]), "Hq": top_hq + 2 * rng.randrange(1, 8) + 1, "Hk": rng.choice([1, 3, 5]),
         "D": d},
    ]
