"""The seed variants agent/studies/measure_baselines.py times beside each seed: per operator, a name and
how it changes the seed's CONFIGS (a dict of set_path paths, or a function that edits a copy in place).
Each flips the structural switches the seeds expose (FLAT, PERSISTENT, TMA, SPLIT_K, W_TMA ...) or a tile
choice, across the size buckets named, so one GPU run tells which structure wins on which shape.
"""
from __future__ import annotations

from typing import Any


def set_path(cfg: Any, path: str, value: Any) -> None:
    """cfg["a"]["b"] = value for "a.b"; "*" walks every entry of a dict or list ((bound, dict) pairs too)."""
    head, _, rest = path.partition(".")
    if head == "*":
        items = cfg.values() if isinstance(cfg, dict) else cfg
        targets = [it[1] if isinstance(it, (tuple, list)) and len(it) == 2 and isinstance(it[1], dict) else it
                   for it in items]
    else:
        key = int(head) if isinstance(cfg, list) else (int(head) if head.isdigit() and int(head) in cfg else head)
        if not rest:
            cfg[key] = value
            return
        targets = [cfg[key]]
    for t in targets:
        if rest:
            set_path(t, rest, value)
        else:
            raise ValueError(f"path {path!r} ends in '*': name the key to set")


def edited(configs: Any, overrides) -> Any:
    """A deep copy of `configs` changed by a variant's overrides: a dict of set_path paths and values, or a
    function that edits the copy in place."""
    import copy
    changed = copy.deepcopy(configs)
    if callable(overrides):
        overrides(changed)
    else:
        for path, value in overrides.items():
            set_path(changed, path, value)
    return changed


def _every(bucket_key: str, **values) -> dict[str, Any]:
    return {f"{bucket_key}.*.{k}": v for k, v in values.items()}


def _scale(key: str, factor: float, lo: int = 1, hi: int = 32):
    """Every entry of every rms_norm bucket: key times factor, clamped to [lo, hi]."""
    def edit(cfg):
        for table in (cfg["by_block_h"], cfg["decode_by_block_h"]):
            for entry in table.values():
                entry[key] = int(min(hi, max(lo, entry[key] * factor)))
    return edit


def _buckets(lo: int, hi: int, **values):
    """gemm/fused_moe-style (bound, dict) buckets with lo <= bound <= hi: set these values."""
    def edit(cfg):
        for bound, entry in cfg["buckets"]:
            if lo <= bound <= hi:
                entry.update(values)
    return edit


def _both(*edits):
    def edit(cfg):
        for e in edits:
            e(cfg)
    return edit


_DECODE, _PREFILL = (0, 64), (256, 1 << 62)


def _moe(lo: int, hi: int, gemm1: dict | None = None, gemm2: dict | None = None, **values):
    """fused_moe buckets with lo <= bound <= hi (bounds are rows per expert): set values and GEMM tiles."""
    def edit(cfg):
        for bound, entry in cfg["buckets"]:
            if lo <= bound <= hi:
                entry.update(values)
                entry["gemm1"].update(gemm1 or {})
                entry["gemm2"].update(gemm2 or {})
    return edit


_MOE_PREFILL = (48, 1 << 62)      # T=1024 (32 rows per expert) and T=4096 (128) DeepSeek shapes
_TMA_PERSISTENT = dict(TMA=1, PERSISTENT=1, FLATTEN=1, num_stages=4)

VARIANTS: dict[str, list[tuple[str, Any]]] = {
    "fused_moe": [
        ("w_tma", _moe(0, 1 << 62, W_TMA=1)),
        ("prefill_group8", _moe(*_MOE_PREFILL, GROUP_M=8)),
        ("prefill_w_tma_group8", _moe(*_MOE_PREFILL, GROUP_M=8, W_TMA=1)),
        ("prefill_g2_n256", _moe(*_MOE_PREFILL, gemm2=dict(BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3))),
        ("prefill_w_tma_k128", _moe(*_MOE_PREFILL, W_TMA=1, gemm1=dict(BLOCK_K=128, num_stages=2),
                                    gemm2=dict(BLOCK_K=128, num_stages=3))),
        ("prefill_m64_w4", _moe(*_MOE_PREFILL, BLOCK_M=64, gemm1=dict(BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4),
                                gemm2=dict(BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4))),
    ],
    "gemm": [
        ("tma", _buckets(0, 1 << 62, TMA=1)),
        ("tma_persistent", _buckets(0, 1 << 62, **_TMA_PERSISTENT)),
        ("tma_persistent_ws", _buckets(0, 1 << 62, WARP_SPECIALIZE=1, **_TMA_PERSISTENT)),
        ("persistent_128x256", _buckets(*_PREFILL, BLOCK_N=256, num_warps=8, **dict(_TMA_PERSISTENT, num_stages=3))),
        ("persistent_128x128_w8", _buckets(*_PREFILL, num_warps=8, **_TMA_PERSISTENT)),
        ("persistent_128x128x128", _buckets(*_PREFILL, BLOCK_K=128, **dict(_TMA_PERSISTENT, num_stages=2))),
        ("splitk2", _buckets(*_DECODE, SPLIT_K=2)),
        ("splitk4", _buckets(*_DECODE, SPLIT_K=4)),
        ("splitk4_tma", _buckets(*_DECODE, SPLIT_K=4, TMA=1)),
        ("decode_bn32", _both(_buckets(*_DECODE, BLOCK_N=32), _buckets(*_DECODE, num_stages=5))),
    ],
    "rms_norm": [("persistent", {**_every("by_block_h", PERSISTENT=1), **_every("decode_by_block_h", PERSISTENT=1)})] + [
        (f"persistent_s{s}_p{p}", {**_every("by_block_h", PERSISTENT=1, LOOP_STAGES=s, PROGRAMS_PER_SM=p),
                                   **_every("decode_by_block_h", PERSISTENT=1, LOOP_STAGES=s, PROGRAMS_PER_SM=p)})
        for s, p in ((2, 2), (2, 4), (3, 4), (2, 8))] + [
        ("warps_half", _scale("num_warps", 0.5)), ("warps_double", _scale("num_warps", 2)),
        ("rows_double", _scale("ROWS", 2, hi=16))],
    # the key search split 2 ways (bisection, the seed before 2026-12-01 session 7) to 32 ways
    "top_k_top_p_filter": [
        ("bisect", {"WAYS": 2, "BLOCK_V": 1024}), ("ways4", {"WAYS": 4}),
        ("ways16_b1024_w8", {"BLOCK_V": 1024, "num_warps": 8}), ("ways32_b256", {"WAYS": 32, "BLOCK_V": 256})],
    "silu_and_mul": [("grid2d", _every("by_outputs", FLAT=0))] + [
        (f"flat{b}w{w}", _every("by_outputs", FLAT=1, BLOCK=b, num_warps=w))
        for b, w in ((256, 2), (512, 4), (1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8))],
}
