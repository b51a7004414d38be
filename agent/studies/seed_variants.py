"""The seed variants agent/studies/measure_baselines.py and measure_new_ops.py (--variants) time beside each
seed: per operator, a name and how it changes the seed's CONFIGS (a dict of set_path paths, or a function that
edits a copy in place). `seed_variant` is the one way both apply a variant; a path must name a key CONFIGS
already has (set_path raises KeyError otherwise) and a variant must change something (`check_variants`).
Each flips the structural switches the seeds expose (FLAT, PERSISTENT, TMA, SPLIT_K, W_TMA ...) or a tile
choice, across the size buckets named, so one GPU run tells which structure wins on which shape.
"""
from __future__ import annotations

import importlib.util
import sys
from typing import Any, Callable


def set_path(cfg: Any, path: str, value: Any) -> None:
    """cfg["a"]["b"] = value for "a.b"; "*" walks every entry of a dict or list ((bound, dict) pairs too).
    Every key must exist already (KeyError otherwise): a misspelt path must not add a key the seed never reads."""
    head, _, rest = path.partition(".")
    if head == "*":
        items = cfg.values() if isinstance(cfg, dict) else cfg
        targets = [it[1] if isinstance(it, (tuple, list)) and len(it) == 2 and isinstance(it[1], dict) else it
                   for it in items]
    else:
        key = int(head) if isinstance(cfg, list) else (int(head) if head.isdigit() and int(head) in cfg else head)
        if isinstance(cfg, dict) and key not in cfg:
            raise KeyError(f"no key {head!r} here (keys: {', '.join(map(str, cfg))})")
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


def load_seed(spec) -> Any:
    """The operator's seed.py as a fresh module named aka_seed_<op>."""
    name = f"aka_seed_{spec.name}"
    mod_spec = importlib.util.spec_from_file_location(name, spec.seed_path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    mod_spec.loader.exec_module(module)
    return module


def seed_variant(module, overrides) -> Callable[..., Any]:
    """The seed's function run with CONFIGS changed by `overrides` (restored after each call): a dict of
    set_path paths and values, or a function that edits a copy of CONFIGS in place."""
    fn = getattr(module, module.__name__.removeprefix("aka_seed_"))
    if not overrides:
        return fn
    changed = edited(module.CONFIGS, overrides)

    def run(**inputs):
        saved = module.CONFIGS
        module.CONFIGS = changed
        try:
            return fn(**inputs)
        finally:
            module.CONFIGS = saved
    return run


def check_variants(op: str, configs: Any) -> list[str]:
    """One line per variant of `op` that does not apply to `configs`: a path that names no key, an edit that
    raises, or one that leaves CONFIGS unchanged (a bucket range that matches no bucket)."""
    problems = []
    for name, overrides in VARIANTS.get(op, []):
        try:
            if edited(configs, overrides) == configs:
                problems.append(f"{op}:{name} changes nothing")
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            problems.append(f"{op}:{name}: {type(exc).__name__}: {exc}")
    return problems


def _every(bucket_key: str, **values) -> dict[str, Any]:
    return {f"{bucket_key}.*.{k}": v for k, v in values.items()}


def _layer_norm_before(**values):
    """layer_norm's decode table as before 2026-12-03 (no SHIFT, one warp count at every T), with these values."""
    def edit(cfg):
        for entry in cfg["decode_by_block_h"].values():
            entry.update(values, SHIFT=0)
            entry.pop("small_t_num_warps", None)
    return edit


def _scale(key: str, factor: float, lo: int = 1, hi: int = 32):
    """Every entry of every rms_norm bucket: key times factor, clamped to [lo, hi]."""
    def edit(cfg):
        for table in (cfg["by_block_h"], cfg["decode_by_block_h"]):
            for entry in table.values():
                entry[key] = int(min(hi, max(lo, entry[key] * factor)))
    return edit


def _buckets(lo: int, hi: int, table: str = "buckets", **values):
    """gemm/fused_moe-style (bound, dict) buckets in cfg[table] with lo <= bound <= hi: set these values."""
    def edit(cfg):
        for bound, entry in cfg[table]:
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


def _rotary(d_tokens: int, d_warps: int, p_tokens: int, p_warps: int) -> dict[str, int]:
    """rotary_embedding at D = 128 (BLOCK_HALF 64), fused: TOKENS and num_warps of decode and of prefill."""
    return {"by_block_half.64.TOKENS": d_tokens, "by_block_half.64.num_warps": d_warps,
            "prefill_by_block_half.64.TOKENS": p_tokens, "prefill_by_block_half.64.num_warps": p_warps}


_MOE_PREFILL = (48, 1 << 62)      # T=1024 (32 rows per expert) and T=4096 (128) DeepSeek shapes
_TMA_PERSISTENT = dict(TMA=1, PERSISTENT=1, FLATTEN=1, num_stages=4)


def _topk128(rows: int, warps: int, select: int) -> dict[str, Any]:
    """moe_topk_softmax's E = 128 entry, at every T (both tables)."""
    entry = {"ROWS": rows, "num_warps": warps, "SELECT": select}
    return {"by_block_e.128": dict(entry), "large_t_by_block_e.128": dict(entry)}


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
        ("align_atomic", {"align_rank": 1}),        # routing by atomic ranks: 2 launches above 1024 pairs, no sort
        ("align_atomic_2048", {"align_rank": 1, "align_single_program_max_pairs": 2048}),   # T256-k8: one launch
        ("pdl_off", {"PDL": 0}),                         # without programmatic dependent launch (before 2026-12-06)
        # the bucket of 13-24 rows per expert (T256-E128) with GEMM 1 on GEMM 2's tile, the seed before 2026-12-06
        ("decode_gemm1_joint", _moe(13, 24, gemm1=dict(BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4))),
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
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
    ],
    "rms_norm": [("persistent", {**_every("by_block_h", PERSISTENT=1), **_every("decode_by_block_h", PERSISTENT=1)})] + [
        (f"persistent_s{s}_p{p}", {**_every("by_block_h", PERSISTENT=1, LOOP_STAGES=s, PROGRAMS_PER_SM=p),
                                   **_every("decode_by_block_h", PERSISTENT=1, LOOP_STAGES=s, PROGRAMS_PER_SM=p)})
        for s, p in ((2, 2), (2, 4))] + [
        ("warps_half", _scale("num_warps", 0.5)), ("warps_double", _scale("num_warps", 2)),
        ("rows_double", _scale("ROWS", 2, hi=16)),
        ("masked", {"even": 0}), ("before", {"even": 0, "decode_small_t": 0}),   # the seed before 2026-12-04
        ("pdl", {"PDL": 1})],                            # PDL (2026-12-04; timed on an H100: session22_h100.md)
    # the split-row path at every B (2026-12-02 session 9); its counters kept per thread across a chunk (LOCAL_ACC)
    # with chunks per row, tile and warps
    "top_k_top_p_filter": [
        # the bins path (BIN_PATH, 2026-12-06): the key-search paths it replaced (their variants were timed in
        # sessions 8-22), then its own settings: bins twice as fine, a window of 16 units, tiles and warps of its
        # two reads, chunks a row, the search's warps and tile, PDL (4096-wide tiles and 8 warps on 1024-wide
        # ones were slower on every shape of B >= 64 on an H100, 2026-12-06: benchmarks/results/topk_bins.md)
        ("search_paths", {"BIN_PATH": 0}),
        ("bins_fine", {"BIN_SCALE": 16, "BIN_COUNT": 512}),
        ("bins_window16", {"BIN_SCALE": 4, "BIN_COUNT": 64}),
        ("bins_tile512", {"BIN_BLOCK_V": 512}),
        ("bins_tile2048_w8", {"BIN_BLOCK_V": 2048, "BIN_num_warps": 8}),
        ("bins_chunks16", {"BIN_MAX_CHUNKS": 16}),
        ("bins_programs2112", {"BIN_PROGRAMS": 2112}),
        ("bins_search_w4", {"BIN_SEARCH_num_warps": 4}),
        ("bins_search_tile2048", {"BIN_SEARCH_BLOCK": 2048}),
        ("bins_scan_every_tile", {"BIN_SKIP_EMPTY": 0}),        # the write pass's scan on every tile (call 4)
        ("bins_red8", {"BIN_RED": 8}),                          # decide merging 8 chunks a step (call 4)
        ("bins_pdl_off", {"PDL": 0}),
        # bins of 1/8 and 1/2 a unit over the same 32 units (1/4 since session 25: tl.histogram's ballots and
        # masks a logit grow with the bins, 1040 SASS instructions in stats at 256 bins, 784 at 128, 760 at 64
        # built for sm_90; the undecided bands with their width), the reads without the next tile loaded ahead,
        # decide's bounds without Z less the other side (BIN_TIGHT); rows of up to 2048 undecided entries sorted in
        # registers (BIN_SORT_MAX) off, or up to 4096 / 8192; the search on 8 warps (spills under triton 3.6) or
        # with 32 ways a pass; all five as the seed was before session 25
        ("bins_eighth", {"BIN_SCALE": 8, "BIN_COUNT": 256}),
        ("bins_half", {"BIN_SCALE": 2, "BIN_COUNT": 64, "BIN_CAP": 32768}),
        ("bins_no_prefetch", {"BIN_PREFETCH": 0}),
        ("bins_loose", {"BIN_TIGHT": 0}),
        ("bins_sort_off", {"BIN_SORT_MAX": 0}),
        ("bins_sort4096", {"BIN_SORT_MAX": 4096}),
        ("bins_sort8192", {"BIN_SORT_MAX": 8192}),
        ("bins_search_w8", {"BIN_SEARCH_num_warps": 8}),
        ("bins_search_ways32", {"BIN_SEARCH_WAYS": 32}),
        ("bins_before_s25", {"BIN_SCALE": 8, "BIN_COUNT": 256, "BIN_PREFETCH": 0, "BIN_TIGHT": 0, "BIN_SORT_MAX": 0,
                             "BIN_SEARCH_num_warps": 8}),
    ],
    # decode rows (T <= 256, H = 4096) lost to Liger 0.88-0.91: weight/bias loads issued before x's, rsqrt (the
    # decode defaults since 2026-12-02); one three-value exchange for the statistics (CHAN) read 1.4x slower; one
    # two-value reduction of sums about the row's first element (SHIFT) and 16 warps up to 64 rows (2026-12-03)
    "layer_norm": [
        ("masked", {"even": 0}),                                                       # the seed before 2026-12-04
        ("small_t_w8", {"decode_by_block_h.4096.small_t_num_warps": 8}),               # SHIFT alone
        ("small_t_w32", {"decode_by_block_h.4096.small_t_num_warps": 32}),
        ("no_shift_w16", _every("decode_by_block_h", SHIFT=0)),
        ("no_shift", _layer_norm_before(PRELOAD_WB=1, RSQRT=1)),                      # the seed before 2026-12-03
        ("decode_chan8", {**_every("decode_by_block_h", CHAN=8, SHIFT=0), "decode_small_t": 0}),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
    ],
    # T = 8192 lost to torch.compile (0.88): one program per TOKENS tokens for q and k together (FUSED)
    "qk_rms_norm": [
        ("prefill_fused_t2", _every("prefill_by_block_d", FUSED=1, TOKENS=2, PRELOAD_W=1)),
        ("prefill_unfused", {**_every("prefill_by_block_d", FUSED=0, TOKENS=1, num_warps=4),   # before 2026-12-02
                             "prefill_by_block_d.64.num_warps": 2}),
        ("prefill_fused_t8_w8", _every("prefill_by_block_d", FUSED=1, TOKENS=8, num_warps=8)),
        ("fused_t1", {**_every("by_block_d", FUSED=1, TOKENS=1), **_every("prefill_by_block_d", FUSED=1, TOKENS=4)}),
        ("fused_t1_w2", {**_every("by_block_d", FUSED=1, TOKENS=1, num_warps=2),
                         **_every("prefill_by_block_d", FUSED=1, TOKENS=2, num_warps=2)}),
        ("preload", {**_every("by_block_d", PRELOAD_W=1), **_every("prefill_by_block_d", PRELOAD_W=1)}),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
    ],
    # ties with Liger (0.98-1.01) at H = 7168/8192 (BLOCK_H 8192): the weight loaded before x and residual
    "fused_add_rms_norm": [
        ("preload", {**_every("by_block_h", PRELOAD_W=1), **_every("decode_by_block_h", PRELOAD_W=1)}),
        ("preload_w32", {**_every("by_block_h", PRELOAD_W=1), **_every("decode_by_block_h", PRELOAD_W=1),
                         "by_block_h.8192.num_warps": 32, "decode_by_block_h.8192.num_warps": 32}),
        ("preload_w8", {**_every("by_block_h", PRELOAD_W=1), **_every("decode_by_block_h", PRELOAD_W=1),
                        "by_block_h.8192.num_warps": 8, "decode_by_block_h.8192.num_warps": 8}),
        ("decode_plain", {**_every("decode_by_block_h", PRELOAD_W=0), "decode_by_block_h.8192.num_warps": 16}),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
    ],
    # ONE_READ (x read once, a chunk a program held in registers across the row's wait) against the two passes
    # (6 bytes an element for bf16 x against 8), above ONE_READ_MIN_BYTES (48 MB: T = 256) or everywhere; its chunk
    # and warps
    "softmax": [
        ("two_pass", {"ONE_READ": 0}),                                       # the seed before 2026-12-04
        # (one_read_everywhere, ONE_READ_MIN_BYTES 0: retired, the two passes were faster at T = 64 on the H200,
        # 2026-12-04, the seed's ONE_READ_MIN_BYTES comment)
        ("one_read_b4096_w4", {"ONE_READ_BLOCK": 4096, "ONE_READ_WARPS": 4}),
        # (one_read_b8192_w4, 4 warps: retired, 0.99-1.01 of the seed's time on every hot shape, H100, 2026-12-05)
        # the two passes at T = 64 (19 MB, where they stay): 512 programs of 5 steps each ran at 40-44% of DRAM
        # bandwidth and 44% occupancy, long-scoreboard bound (ncu, 2026-12-04); more, shorter programs (2048 or
        # 4096 targets: retired, no gain in session 19); twice the bytes a step in flight (8192-wide steps, 32
        # logits a thread on 8 warps or 16 on 16; T = 64 is at 0.51-0.52 of its roofline on the H200, 2026-12-06)
        ("steps8192", {"BLOCK_V": 8192}),
        ("steps8192_w16", {"BLOCK_V": 8192, "num_warps": 16}),
        # PDL for an x of at most 4 MB (2026-12-05, H100): against none (`pdl_every_call`, PDL on every call: retired,
        # 1.03 of the time at T = 64 and 1.00 at T = 256 on an H100, session 22)
        ("pdl_off", {"PDL": 0}),
        # the one-read wait polling by volatile loads, not atomic reads (2026-12-06, untimed)
        ("one_read_poll_loads", {"ONE_READ_POLL_LOADS": 1}),
        # the seed before 2026-12-07: pass 2 without streaming stores, in reverse order. The seed took `aka optimize`'s
        # pair (session 31) from an H100's paired rounds; the H200 has not timed the two side by side
        ("before_s32", {"STORE_CS": 0, "REVERSE": 1}),
    ],
    # T = 8192 (458752 (row, group) pairs, the largest bucket) lost to torch.compile by 2%
    "per_token_group_quant_fp8": [
        ("big_g32_w8", {f"by_pairs.{1 << 40}.BLOCK_G": 32, f"by_pairs.{1 << 40}.num_warps": 8}),
        # (big_g64_w8, 64 groups on 8 warps in the largest bucket: retired in session 35, 47.34 us at T = 8192 against
        # 44.96 for today's 16 on 4, H200, new_ops_h200_records/s8_tables.md)
        ("big_g8_w4", {f"by_pairs.{1 << 40}.BLOCK_G": 8}),
        ("big_g16_w8", {f"by_pairs.{1 << 40}.num_warps": 8}),                  # the seed before 2026-12-02
        ("mid_g16_w8", {"by_pairs.262144.BLOCK_G": 16, "by_pairs.262144.num_warps": 8,
                        f"by_pairs.{1 << 40}.BLOCK_G": 32, f"by_pairs.{1 << 40}.num_warps": 8}),
        # (mid_g16_w4 and mid_g32_w8, 16 / 32 groups a program in the middle bucket for T = 1024's 8.37 us on the
        # H200: retired, 0.99-1.01 of the seed's time there on an H100 in 9 rounds, 2026-12-06,
        # benchmarks/results/suite_h100_s26_records/conv_rerun_report.md)
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
        # the 16384 bucket (T = 64-256 at H = 7168) before session 35: 4 groups on 4 warps, 8-byte loads. 8 groups took
        # 0.92-0.96 of its time on an H100 in three runs (benchmarks/results/session35_h100.md); the H200 has not
        # timed the two side by side. (Retired there: 16 groups, or 2 warps, in this bucket (no faster than 8 groups
        # on 4); 1, 2 or 4 groups on 1 or 2 warps in the 1024 bucket, and 2 warps in the 262144 bucket, within noise
        # at T16-H7168, T64-H1536 and T1024-H7168, the shapes the median attainment (0.598, H200) sits on.)
        ("b16k_g4_w4", {"by_pairs.16384.BLOCK_G": 4}),
        ("index64", {"index32": 0}),      # int64 index division, the seed before session 35 (offline: 104 more SASS)
    ],
    # decode, 2.1-2.5 us at T <= 256 with the bitonic top-k (SELECT=3); SELECT 0-2 take k = 8 rounds of dependent
    # row reductions (3, 2 or 1 a round)
    "moe_topk_softmax": [
        # E = 128 is every hot shape: the variants set its entry (ROWS, warps, SELECT) in both T tables
        ("select2_r4_w2", _topk128(4, 2, 2)),                                      # the seed before 2026-12-03
        ("select1_r4_w2", _topk128(4, 2, 1)),
        # the default is SELECT=3 (a bitonic top-k) at every T, one token a one-warp program, int32 keys on bf16
        # logits (456 SASS instructions against 664 at T = 1); the int64 keys and the large-T table (SELECT=1
        # from 2048 tokens) as before key32 (2026-12-03)
        ("select3_r2_w1", _topk128(2, 1, 3)),
        ("int64_keys_large_t", {"key32": 0, "large_t_min": 2048}),
        ("int64_keys", {"key32": 0}),
        ("key32_r1_w2", _topk128(1, 2, 3)),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on neither card)
    ],
    # Hk * D = 128 rows take the 256 entry (half its lanes masked off): narrower entries, more tokens a program
    "reshape_and_cache": [
        ("row128_t2_w1", lambda c: c["by_row"].update({128: {"BLOCK": 128, "TOKENS": 2, "num_warps": 1}})),
        # (row128_t4_w1 retired in session 35: 1.07-1.20x the seed's time at T = 1-256 on the H200,
        # new_ops_h200_records/s13_loads_first_variants.json)
        ("row128_t4_w2", lambda c: c["by_row"].update({128: {"BLOCK": 128, "TOKENS": 4, "num_warps": 2}})),
        ("row128_t8_w4", lambda c: c["by_row"].update({128: {"BLOCK": 128, "TOKENS": 8, "num_warps": 4}})),
        ("t1", {"by_row.256.TOKENS": 1}),
        ("t4_w4", {"by_row.256.TOKENS": 4, "by_row.256.num_warps": 4}),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
        ("bs_runtime", {"bs_constexpr": 0}),     # the block size a runtime value, the seed before session 35
    ],
    # 3-29 us against a 1.3 us floor at first (T256, P = 2048 pairs: 26 us in one program sorting 2048 keys).
    # A one-program call's time is its instruction chain: the seed before 2026-12-03, then the sentinel tiles
    # (experts x BLOCK masked stores) and 32-wide expert_ids tiles back, the decode buckets' warps and rank mode,
    # the large bucket's chunk
    "moe_align_block_size": [
        ("sort_before", lambda c: c.update(
            buckets=[(1024, dict(CHUNK=1024, RANK=0, num_warps=4)), (2048, dict(CHUNK=2048, RANK=0, num_warps=8)),
                     (1 << 62, dict(CHUNK=2048, RANK=0, num_warps=8))], fill=0, map_tile=32)),
        ("sentinel_tiles", lambda c: c.update(fill=0, map_tile=32)),
        ("decode_w8", _buckets(0, 512, num_warps=8)),
        ("decode_w2", _buckets(0, 512, num_warps=2)),
        ("large_c512_w8", _buckets(513, 1 << 62, CHUNK=512, num_warps=8)),
        # PDL where a call launches two kernels (2026-12-05, H100): against none and every launch. (decode_match,
        # RANK=2 at P <= 512, retired here: 25-26 us at T = 64 against the seed's 4.7-5.1, H100, 2026-12-05.)
        ("pdl_off", {"PDL": 0}),
        ("pdl_every_launch", {"PDL": 2}),
    ],
    # T = 1024 at H = 128 (64 programs of 16 rows) lost to torch.compile (3.04 against 2.19 us): now 4 rows a
    # one-warp program and at least min_programs programs; the seed before 2026-12-03, FAST's instructions
    "gated_rms_norm": [
        ("rows16_before", {"by_block_h.128.ROWS": 16, "by_block_h.128.num_warps": 4, "min_programs": 0}),
        ("fast", {"FAST": 1}),
        ("min_p1056", {"min_programs": 1056}),
        ("min_p264", {"min_programs": 264}),
        ("rows2_w1", {"by_block_h.128.ROWS": 2}),
        ("fast_rows2_w1", {"by_block_h.128.ROWS": 2, "FAST": 1}),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on neither card)
    ],
    # one table for every T. Rows of 7168 (BLOCK_H 8192) took 16 warps until session 35, 2.50-3.95 us at T = 16-256
    # on the H200 (0.33-0.53 attainment, the median 0.555); 8 warps since: 0.94-0.97 of the time at decode and the
    # same at prefill on an H100 in three runs (benchmarks/results/session35_h100.md). The H200 has not timed the two
    # side by side. (Retired there: 4 warps, between the two; 32, slower everywhere; rows of 2048 on 2 or 8 warps
    # instead of 4, within the 4% noise of 2 us.)
    "per_token_quant_fp8": [
        ("pdl", {"PDL": 1}),
        ("h8192_w16", {"by_block_h.8192.num_warps": 16}),
    ],
    "moe_sum_reduce": [("pdl", {"PDL": 1})],
    # (l2_norm: gated_rms_norm's small programs at H = 128, a `min_programs` switch written and timed in session 26
    # and taken out again: at T = 8 one program of 16 rows on 4 warps read 1.89 us against torch.compile's 1.76 on
    # an H100 in one timing, but 1.57 against 1.63 on the H200 in 9 paired rounds, and 1, 4 or 16 rows a program
    # were within 2-4% of the seed on every hot shape there: benchmarks/results/h200.md, session 26)
    "l2_norm": [("pdl", {"PDL": 1})],
    # prefill (B2/B4, D 4096, L 2048) at 0.44 of its roofline with W shifted 2-byte loads per output; now two
    # aligned vectors a row of 8 (VEC_W4). The scalar taps (the seed before 2026-12-03), the tile and warps
    "causal_conv1d": [
        ("scalar_taps", {"VEC_W4": 0, "BLOCK_D": 8, "BLOCK_L": 256}),      # the seed before 2026-12-03
        ("vec_d8_l256", {"BLOCK_D": 8, "BLOCK_L": 256}),
        ("d4_l512_w4", {"BLOCK_D": 4, "BLOCK_L": 512}),
        ("d1_l2048_w4", {"BLOCK_D": 1, "BLOCK_L": 2048}),
        ("d2_l1024_w8", {"num_warps": 8}),
        ("d4_l1024_w8", {"BLOCK_D": 4, "num_warps": 8}),
    ],
    # decode rows (H = 8192, T 16-256) at 0.28-0.44 attainment, one row a 16-warp program: now one two-value
    # reduction (ONE_REDUCE) and 8 warps; the seed before 2026-12-03, each change alone, the warps
    "rms_norm_quant_fp8": [
        ("masked", {"even": 0}),                                        # the seed before 2026-12-04
        ("two_reduces", {"ONE_REDUCE": 0}),
        ("w16", {"by_block_h.8192.num_warps": 16}),
        ("w4", {"by_block_h.8192.num_warps": 4}),
        ("w32", {"by_block_h.8192.num_warps": 32}),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
        # what `aka optimize`'s search accepted on an H100 (2026-12-07, session 36): score 1.018x the seed's in
        # 30 paired rounds (p = 0.0001); the two changes above together. Apart, in 9 paired rounds on that H100:
        # w16 0.96-0.99 of the seed's time at decode, pdl 1.01-1.02 (benchmarks/results/session36_h100.md)
        ("w16_pdl", {"by_block_h.8192.num_warps": 16, "PDL": 1}),
    ],
    # decode (one new token per sequence): the 64-bit-word kernel (PACKED, 2026-12-04) against the element-wise
    # ones, and its channel tiles and warps per batch bucket
    "causal_conv1d_update": [
        ("elementwise", _buckets(0, 1 << 62, PACKED=0)),                      # the seed before 2026-12-04
        ("packed_b128_w1_small", _buckets(0, 16, PACKED_BLOCK_D=128, packed_num_warps=1)),
        ("packed_b512_w4_small", _buckets(0, 16, PACKED_BLOCK_D=512, packed_num_warps=4)),
        ("packed_b256_w2_mid", _buckets(17, 64, PACKED_BLOCK_D=256, packed_num_warps=2)),
        ("packed_b2048_w8_large", _buckets(65, 1 << 62, PACKED_BLOCK_D=2048, packed_num_warps=8)),
        ("packed_b1024_w4_large", _buckets(65, 1 << 62, PACKED_BLOCK_D=1024, packed_num_warps=4)),
        ("pdl", {"PDL": 1}),                             # PDL (2026-12-04; timed on an H100: session22_h100.md)
    ],
    # lost to Liger on every hot shape (T = 8192: 16.7 against 12.4 us): the two-program grid (one q and one k
    # program a token, each reloading cos/sin) against one fused program per TOKENS tokens. D = 128 (key 64):
    # each variant is a decode point (d<TOKENS>w<warps>) and a prefill point (p<TOKENS>w<warps>); the seed is
    # d1w4_p4w8
    "rotary_embedding": [
        ("two_programs", {**_every("by_block_half", FUSED=0), **_every("prefill_by_block_half", FUSED=0),
                          "prefill_by_block_half.32.num_warps": 2, "prefill_by_block_half.64.num_warps": 4,
                          "prefill_by_block_half.128.num_warps": 4}),       # the seed before the fused path
        ("d1w1_p1w2", _rotary(1, 1, 1, 2)),
        ("d1w2_p2w4", _rotary(1, 2, 2, 4)),
        ("d1w8_p4w4", _rotary(1, 8, 4, 4)),
        ("d2w4_p8w8", _rotary(2, 4, 8, 8)),
        ("d2w2_p1w4", _rotary(2, 2, 1, 4)),         # p1w4: one token a program, 4 warps, as Liger's grid
        ("pdl", {"PDL": 1}),                         # PDL (2026-12-04; timed on an H100: session22_h100.md)
    ],
    "silu_and_mul": [("grid2d", _every("by_outputs", FLAT=0))] + [
        (f"flat{b}w{w}", _every("by_outputs", FLAT=1, BLOCK=b, num_warps=w))
        for b, w in ((256, 2), (512, 4), (1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8))] + [
        # the decode bucket's one-row-a-program path (FLAT=2, 2026-12-04) against its flat launch, and its warps
        ("small_flat", _buckets(0, 1 << 16, "by_outputs", FLAT=1)),
        ("small_row_w1", _buckets(0, 1 << 16, "by_outputs", row_num_warps=1)),
        ("small_row_w2", _buckets(0, 1 << 16, "by_outputs", row_num_warps=2)),
        # the constant-width flat kernel (FLAT=3, 2026-12-04) against the runtime-width one it replaced above
        # 2^16 outputs, and its tile
        ("runtime_i", _buckets(1 << 17, 1 << 62, "by_outputs", FLAT=1)),
        ("const_i_2048w8", _buckets(1 << 17, 1 << 62, "by_outputs", BLOCK=2048, num_warps=8)),
        ("const_i_512w4", _buckets(1 << 17, 1 << 62, "by_outputs", BLOCK=512)),
        ("const_i_evict_first", {"flat_evict": "evict_first"}),             # the first FLAT=3 (2026-12-04)
        ("pdl", {"PDL": 1})],                            # PDL (2026-12-04; timed on an H100: session22_h100.md)
}
