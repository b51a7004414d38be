"""Seed top-k / top-p filter: bounds from a histogram, then an exact threshold among the few entries they leave.

The bins path (BIN_PATH=1, the default since 2026-12-06): two reads of the logits and one write at any B, in
4 launches, where the key searches below read them 17-33 times.
  1. stats (B x N chunks): each chunk's max, softmax normalizer part and the counts of its logits by grid
     index floor(x * BIN_SCALE) over the BIN_COUNT indices below its running max (a ring, one count below).
  2. decide (a program a row): the row's max M, normalizer Z and bins (bin j: 1/BIN_SCALE of a unit, j steps
     below M's). exp(x - M) of a bin lies between the exps of its edges, so counts give exact top-k bounds and
     bounded masses give top-p ones: every bin is certainly kept, certainly out, or undecided (a band around
     each cut). Each chunk gets the offset of its undecided entries in the row's buffer (BIN_CAP a row).
  3. write (B x N): kept entries copied, the rest -inf; undecided ones (value, column) to the buffer; each
     chunk's exact mass of kept entries summed.
  4. search (a program a row): the exact thresholds among the undecided entries, sorted in registers when at
     most BIN_SEARCH_BLOCK (the common case) or BIN_SORT_MAX, else by the multi-way key search below; a row
     whose buffer overflowed is searched whole (slow, exact). The undecided entries that stay are written over
     the -inf. The launch takes as long as its slowest row: one searched by passes.
Exact like the key searches (integer counts; fp32 masses in another order, which the contract's 1e-3 margin
allows): the bounds carry a slack of 1e-4 in mass, and a row whose max is beyond +-2^19 (bin edges not exact in
fp32) is searched whole.

The key-search paths (BIN_PATH=0), thresholds by a multi-way search over the ordered bit patterns of fp32:

One program per row. Logits map to int32 keys that order like the floats (negative floats have their
magnitude bits flipped), so a search over keys finds an exact threshold:
  t_k = the largest float t with count(x >= t) >= k   (the k-th largest logit; ties at it all kept)
  t_p = the smallest float t >= t_k with mass(x > t) < p, mass under the softmax of the entries >= t_k
and the row is written as x where x >= max(t_k, t_p), else -inf. Each pass over the row tests WAYS - 1
(top-k) or WAYS (top-p) thresholds at once, splitting the key interval WAYS ways: ceil(32 / log2(WAYS))
passes per threshold instead of bisection's 32 (WAYS=2). At the B=2 prefill shapes one program per row is
bound by the latency of its passes (1.8 ms for ~70 passes over 129k logits on the H200, against the sort's
0.66 ms), which is what fewer passes buy back. No host synchronization.

Two paths, chosen per call from B (CONFIGS):
- one program per row (B > SPLIT_MAX_B, or a row too short to split): the kernel above, BLOCK_V / num_warps /
  WAYS; a variant since every hot B took the split path (below).
- split rows (B <= SPLIT_MAX_B): one program per row runs on B of the H200's 132 SMs only, and each pass
  counts BLOCK_V x WAYS compares a tile on one SM (B=2: 2.1-2.5 ms against the sort's 0.66-0.73). Each row
  is cut into N chunks of SPLIT_BLOCK_V-aligned length and the same search runs on a (B, N) grid, one launch
  per pass from a host-side loop: each program reads the previous launch's per-chunk partials of its row
  (counts [B, N, WAYS] int32, exp masses [B, N, WAYS] fp32, chunk maxima and normalizer parts [B, N]),
  sums them in a fixed order, takes the same integer step as the one-program kernel (every program of a
  row computes the same lo/hi from the same bytes; chunk 0 stores them for the next launch), then counts
  its own chunk for the new candidates. Partials and the per-row state are double-buffered between
  launches; kernel boundaries on the stream are the only synchronization (no atomics, no host sync, so
  the call stays graph-capturable). Launches: PASSES top-k (the first also keeps the chunk maxima; its
  key interval is the whole float range, so no min/max pass), PASSES top-p (the first also finishes t_k
  and sums the chunk's softmax normalizer part: masses are counted unnormalized and divided by the
  summed normalizer when compared with p), one final pass that finishes t_p and writes its chunk:
  2 * PASSES + 1 = 17 launches at SPLIT_WAYS=16 (33 at 4, taken from MANY_ROWS_MIN_B rows). N = SPLITS, or
  when 0, SPLIT_PROGRAMS // B capped at SPLIT_MAX_CHUNKS; the chunk length is rounded up to SPLIT_BLOCK_V, so
  fewer chunks may remain (a row that fits one chunk takes the one-program path). Top-k thresholds are exact either way (integer counts); top-p
  sums its fp32 masses in another order than the one-program kernel, which the contract allows: every
  nucleus boundary of the inputs has a margin of 1e-3 in probability mass.

TOPK_RADIX=1 (CONFIGS; the split path) finds t_k by radix select instead: 4 passes, one a byte of the 32-bit
key from the top, each a 256-bin histogram (tl.histogram) of that byte over the keys whose higher bytes are the
prefix chosen so far; the next launch sums the row's chunk histograms and takes the bin that holds the k-th
largest key, counting the keys of the bins above it off k. 4 launches in place of the search's 8 (16 ways) or
16 (4 ways), and a pass counts one bin a logit, not WAYS compares. Exact, like the search: integer counts.
"""
import torch
import triton
import triton.language as tl

# 16 ways, 1024-wide tiles, 8 warps: the variant `ways16_b1024_w8`, 1.4-1.6x faster than 512-wide tiles with 4
# warps on every hot shape on the H200 (2026-12-02, benchmarks/results/new_ops_h200.md).
CONFIGS = {
    "BLOCK_V": 1024, "num_warps": 8, "WAYS": 16,
    # Split rows when B <= SPLIT_MAX_B (0: never). Every hot B splits: on the H200 (2026-12-02 session 9,
    # benchmarks/results/new_ops_h200.md) the split path beat one program per row at B = 2 (73.6 against
    # 2102 us), B = 64 (837 against 2544) and B = 256 (3232 against 4061).
    "SPLIT_MAX_B": 1 << 30,
    # Chunks per row: SPLITS when > 0, else SPLIT_PROGRAMS // B (1056: eight programs per SM of the H200),
    # at most SPLIT_MAX_CHUNKS (0: no cap). The cap keeps B = 2 at the 132 chunks of 2 tiles it was timed at
    # (528 one-tile chunks read 82-96 us there, the partials' sums outweigh the tiles).
    "SPLITS": 0, "SPLIT_PROGRAMS": 1056, "SPLIT_MAX_CHUNKS": 132,
    # The split path's tile, warps and ways (its own: a chunk is a few tiles, so a pass costs about one launch
    # plus reading N x WAYS partials; more ways mean fewer launches but WAYS compares per logit each).
    "SPLIT_BLOCK_V": 512, "SPLIT_num_warps": 4, "SPLIT_WAYS": 16,
    # LOCAL_ACC=1: each thread adds its compares into its own [BLOCK_V, WAYS] counters over the whole chunk and
    # the counters are summed across threads once, after the loop; 0 (the seed before 2026-12-03) sums every
    # tile's masses across the program's warps (in Hopper SASS the top-p loop held 7 barriers a tile with it, 4
    # without; the integer counts were already summed after the loop by the compiler; 74 tiles a pass at
    # B = 256). 1: the variant `local_acc`, 0.91-0.94 of the time at B = 64, 0.87-0.91 at B = 2 and 0.98-0.99 at
    # B = 256 on the H200 (2026-12-03, benchmarks/results/new_ops_h200.md); 144 registers a thread, not 48.
    "LOCAL_ACC": 1,
    # From LARGE_B_MIN rows (0: never), LARGE_B's entries replace the ones above. B = 256 ran fastest with 16
    # chunks a row and the counters summed a tile at a time: the variant `split16`, 0.90-0.92 of LOCAL_ACC's
    # time with 4 chunks (2877 / 2497 / 2458 against 3193 / 2717 / 2694 us), and 3070 with 16 chunks and
    # LOCAL_ACC (2026-12-03); at B = 2 the same settings were 3x slower, so they apply to large batches only.
    # 256 is the smallest B timed with them; B between 64 and 256 keeps the table above.
    "LARGE_B_MIN": 256,
    "LARGE_B": {"SPLITS": 16, "LOCAL_ACC": 0},
    # From MANY_ROWS_MIN_B rows (0: never), MANY_ROWS's entries replace the table's (LARGE_B's go over both). With
    # many rows a pass is compute-bound (ncu at B = 256: math pipe throttle the top stall of the top-p pass,
    # 2026-12-04): its compares grow as WAYS, the passes shrink only as log2(WAYS). 4 ways, 16 passes each: the
    # variant `split_ways4`, 0.68-0.71 of 16 ways' time at B = 64 and 256 (538.7 / 446.3 us at B64-V151936 /
    # V129280, 2029.6 / 1735.6 / 1732.5 at B = 256, against 795.0 / 645.1 and 2881.2 / 2502.8 / 2461.7; 8 ways
    # 0.73-0.83), and 1.6x slower at B = 2 (107.5 against 66.9 us), where a pass is about one launch and 4 ways
    # take twice the launches (H200, 2026-12-04, new_ops_h200.md). 64 is the smallest B timed with it.
    # TOPK_RADIX and PDL (below) are set here for many rows: radix select on, PDL off (2026-12-05, H100).
    "MANY_ROWS_MIN_B": 64,
    "MANY_ROWS": {"SPLIT_WAYS": 4, "TOPK_RADIX": 1, "PDL": 0},
    # TOPK_RADIX (the docstring): the split path's top-k by radix select, 4 launches; 0: the WAYS-way search. On
    # an H100 (2026-12-05, benchmarks/results/session22_h100.md, one timing a shape) radix select took 0.90-0.95
    # of the search's time at B = 64 and 256 (the variant `topk_radix`: 535.1 / 436.0 us at B64-V151936 /
    # V129280 against 578.0 / 461.3, 2033 / 1752 / 1736 at B = 256 against 2252 / 1918 / 1913), and 1.01-1.05
    # of it at B = 2 (70.9 / 76.9 against 67.8 / 76.1): on from MANY_ROWS_MIN_B rows only. Not yet timed on
    # the H200.
    "TOPK_RADIX": 0,
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): each pass may start while
    # the one before it drains, waits for it (gdc_wait) before its first load and lets the next one start at once
    # (gdc_launch_dependents). At B = 2 a pass is about one launch (17 of them): there PDL took 0.94 / 0.87 of
    # the time (63.7 / 65.9 us at B2-V129280 / V151936 against 67.8 / 76.1, H100, 2026-12-05); from 64 rows a
    # pass is compute-bound and PDL was within noise or slower (507.4 against 461.3 at B64-V129280): off there
    # (MANY_ROWS). Not yet timed on the H200.
    "PDL": 1,
    # TILE_SKIP=1 (the split path, exact): the first top-k pass keeps each tile's max; a top-p pass skips a tile
    # whose max is below t_k (the first) or at most its lowest cut (the others), every top-p pass skips a row
    # with p >= 1, and the write pass stores -inf without reading a tile whose max is below the threshold. A row
    # with k = 20-50 has entries >= t_k in at most that many of its ~300 tiles. Not yet timed (`tile_skip`).
    "TILE_SKIP": 0,
    # BIN_PATH=1: the bins path (the docstring) in place of both key-search paths above: 4 launches, two reads of
    # the logits and one write at any B. On an H100 (2026-12-06, benchmarks/results/topk_bins.md, call 5, same
    # run) it took 0.23-0.24 of the key searches' time at B = 256 (487.8 / 403.9 / 397.1 us against 2028.7 /
    # 1749.5 / 1732.6), 0.29-0.30 at B = 64 (158.5 / 133.3 against 539.5 / 439.6) and 0.40-0.41 at B = 2 (25.7 /
    # 27.2 against 64.0 / 66.3). Its settings: bins BIN_SCALE a logit unit (a power of 2), BIN_COUNT of them
    # below a row's max: 1/8 over 32 units before session 25 (1/16 read 1.3x slower at B = 256; 1/4 over 16
    # units was within 6% at B >= 64 and 0.74 of the time at B = 2, but a window of 16 cannot rule out the entries
    # below it for p near 1 when one logit dominates: V e^-16 ~ 0.02 of the mass, so such rows are searched whole);
    # chunks of BIN_BLOCK_V tiles, BIN_PROGRAMS // B a row, at most BIN_MAX_CHUNKS (2112 programs read 0.92 of
    # the time at B = 256, one timing a shape: not adopted); up to BIN_CAP undecided entries a row buffered; the
    # search's sort tile, ways and warps (8 warps: 0.79-0.91 of 4's time; 16 since session 25, BIN_SORT_MAX's
    # comment). BIN_RED chunks merged a step in decide
    # (32: 0.75-0.78 of 8's time at B = 2, 50 chunks a row; within 2% elsewhere); BIN_SKIP_EMPTY=1: the write pass
    # skips the compaction's scan on tiles without undecided entries (0.90-0.92 of the time at B = 256, 0.92-0.93
    # at B = 64; call 5).
    # Since 2026-12-06 (session 25, H100, one timing a shape, the variant `bins_quarter_prefetch` against the seed
    # in one run): bins of 1/4 a unit over the same 32 units (BIN_COUNT 128) with BIN_PREFETCH, 0.83-0.88 of the
    # time at B = 256 (427.3 / 343.7 / 337.9 us against 483.6 / 404.7 / 404.3), 0.91-0.95 at B = 64 and 0.81 at
    # B = 2. ncu at B256-V151936: stats 136 us against 208 (tl.histogram's ballots and masks), write 125 against
    # 155 (the prefetch), the search 229 against 168 (bands twice as wide).
    "BIN_PATH": 1,
    "BIN_SCALE": 4, "BIN_COUNT": 128, "BIN_BLOCK_V": 1024, "BIN_num_warps": 4,
    "BIN_PROGRAMS": 1056, "BIN_MAX_CHUNKS": 64, "BIN_RED": 32, "BIN_DECIDE_num_warps": 8, "BIN_SKIP_EMPTY": 1,
    "BIN_CAP": 16384, "BIN_SEARCH_BLOCK": 1024, "BIN_SEARCH_WAYS": 16, "BIN_SEARCH_num_warps": 16,
    # BIN_PREFETCH=1: the two reads load tile i + 1 before tile i's block max, histogram and count, each a
    # cross-warp exchange with a barrier, so a DRAM round trip overlaps them (a register copy of a tile more a
    # thread): the write pass 0.81 of its time at B256-V151936 (ncu: 125 against 155 us, 70% of DRAM bandwidth
    # against 57%), stats within 4% (bound by its instructions).
    "BIN_PREFETCH": 1,
    # BIN_SORT_MAX > BIN_SEARCH_BLOCK: rows with more undecided entries than the first sort takes, up to this many,
    # are sorted in registers too (a second tl.sort, this wide, in the same kernel); 0: off. The search on 16
    # warps: triton 3.6 builds it on 8 with 128 registers and a 24-byte stack (ncu: 3.7 MB of local memory
    # traffic at B = 256), on 16 with 113 and no stack. Each alone (H100, 2026-12-06, one timing a shape): 2048
    # took 0.91-0.92 of the time at B256-V129280 / V128256, 0.80-0.81 at B64-V151936, 0.95 at B64-V129280, within
    # 1.5% elsewhere (two runs); 16 warps 0.93 at B = 256, 0.90-0.91 at B = 64, within 1% at B = 2. Replaying
    # the search launch over subsets of its rows (agent/studies/topk_search_probe.py, B256-V151936): rows sorted
    # in registers cost ~3 us, the 45 rows of 1000-4120 entries searched by passes ~125 us (one row of 4120 alone
    # ~90 us): the launch's time is its largest searched row.
    "BIN_SORT_MAX": 2048,
    # BIN_TIGHT=1: decide bounds a side's mass by Z less the other side's where top-k is off (its docstring); on
    # the operator's inputs at B256-V151936 the most undecided entries of a row fell from 3113 to 2045 with bins
    # of 1/4 and from 2029 to 1015 with bins of 1/8 (numpy over decide's bounds, CPU inputs of seed 0). Timed
    # (H100, 2026-12-06, the variant `bins_loose` in the same run): 0.79-0.88 of the time at B = 256 and 64
    # (347.6 / 297.6 / 296.0 us against 425.4 / 340.1 / 335.9 at B = 256), within 1.5% at B = 2.
    "BIN_TIGHT": 1,
}
# code paths the offline search may flip: the bins path's switches (LOCAL_ACC, TOPK_RADIX and TILE_SKIP act on
# the key-search paths only, which BIN_PATH=1 leaves unused)
SEARCH_SPACE = {"BIN_PREFETCH": [0, 1], "BIN_TIGHT": [0, 1], "BIN_SKIP_EMPTY": [0, 1], "PDL": [0, 1]}


@triton.jit
def _key_to_float(key):
    # inverse of the order-preserving map below: flip the magnitude bits back for negative floats
    bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _float_to_key(x):
    # the order-preserving int32 key of an fp32 value: negative floats have their magnitude bits flipped
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


@triton.jit
def _top_k_top_p_filter_kernel(x_ptr, k_ptr, p_ptr, y_ptr, V, stride_x, stride_y, BLOCK_V: tl.constexpr,
                               WAYS: tl.constexpr, PASSES: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_V)
    ways = tl.arange(0, WAYS).to(tl.int64)
    x_row = x_ptr + row * stride_x
    k = tl.load(k_ptr + row)
    p = tl.load(p_ptr + row)
    # pass 1: max and min of the row
    mx = tl.full([BLOCK_V], float("-inf"), tl.float32)
    mn = tl.full([BLOCK_V], float("inf"), tl.float32)
    for off in range(0, V, BLOCK_V):
        mask = off + cols < V
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        mx = tl.maximum(mx, x)
        mn = tl.minimum(mn, tl.where(mask, x, float("inf")))
    top = tl.max(mx, axis=0)
    bottom = tl.min(mn, axis=0)
    # order-preserving int32 keys of the two ends, searched in int64 (keys span the whole int32 range)
    tb = top.to(tl.int32, bitcast=True)
    bb = bottom.to(tl.int32, bitcast=True)
    hi_top = tl.where(tb < 0, tb ^ 0x7FFFFFFF, tb).to(tl.int64)
    lo = tl.where(bb < 0, bb ^ 0x7FFFFFFF, bb).to(tl.int64)
    hi = hi_top
    # top-k: the largest key t with count(x >= t) >= k. Invariant: count(x >= key lo) >= k, and every key
    # above hi counts fewer. Thresholds lo + j * step (j = 0 is lo itself, always true).
    for _ in range(PASSES):
        step = (hi - lo + WAYS) // WAYS
        cand = lo + ways * step
        tf = _key_to_float(tl.minimum(cand, hi).to(tl.int32))
        cnt = tl.zeros([WAYS], dtype=tl.int32)
        for off in range(0, V, BLOCK_V):
            x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
            cnt += tl.sum((x[:, None] >= tf[None, :]).to(tl.int32), axis=0)
        ok = (cnt >= k) & (cand <= hi)
        j = tl.max(tl.where(ok, ways, 0), axis=0)
        new_lo = lo + j * step
        hi = tl.minimum(hi, new_lo + step - 1)
        lo = new_lo
    t_k = _key_to_float(lo.to(tl.int32))
    # normalizer of the softmax over the entries >= t_k
    z = tl.zeros([BLOCK_V], dtype=tl.float32)
    for off in range(0, V, BLOCK_V):
        x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
        z += tl.where(x >= t_k, tl.exp(x - top), 0.0)
    inv_z = 1.0 / tl.sum(z, axis=0)
    # top-p: the smallest key t in [key(t_k), key(top)] with mass(x > t) < p. Invariant: mass(x > key hi) < p
    # (mass(x > top) = 0). Thresholds lo + (j + 1) * step - 1, the last clamped to hi (known true).
    hi = hi_top
    for _ in range(PASSES):
        step = (hi - lo + WAYS) // WAYS
        cand = tl.minimum(lo + (ways + 1) * step - 1, hi)
        tf = _key_to_float(cand.to(tl.int32))
        acc = tl.zeros([WAYS], dtype=tl.float32)
        for off in range(0, V, BLOCK_V):
            x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
            e = tl.where(x >= t_k, tl.exp(x - top), 0.0)
            acc += tl.sum(tl.where(x[:, None] > tf[None, :], e[:, None], 0.0), axis=0)
        below = (acc * inv_z < p) | (ways == WAYS - 1)
        j = tl.min(tl.where(below, ways, WAYS - 1), axis=0)
        new_hi = tl.minimum(lo + (j + 1) * step - 1, hi)
        lo = lo + j * step
        hi = new_hi
    t_p = _key_to_float(lo.to(tl.int32))
    thr = tl.where(p >= 1.0, t_k, t_p)
    for off in range(0, V, BLOCK_V):
        mask = off + cols < V
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride_y + off + cols, tl.where(x >= thr, x, float("-inf")), mask=mask)


# ---- the split-row path: a (B, N) grid, one launch per pass ----------------------------------------------------

_RED = 32          # chunk partials summed this many chunks at a time (a fixed order: deterministic)


@triton.jit
def _sum_parts(ptr, N, WAYS: tl.constexpr, RED: tl.constexpr):
    """Sum over the N chunks of one row's [N, WAYS] partials (row-major), RED chunks at a time."""
    rows = tl.arange(0, RED)
    ways = tl.arange(0, WAYS)
    acc = tl.zeros([RED, WAYS], dtype=ptr.dtype.element_ty)
    for n0 in range(0, N, RED):
        m = (n0 + rows) < N
        acc += tl.load(ptr + (n0 + rows)[:, None] * WAYS + ways[None, :], mask=m[:, None], other=0)
    return tl.sum(acc, axis=0)


@triton.jit
def _sum_chunks(ptr, N, RED: tl.constexpr):
    rows = tl.arange(0, RED)
    acc = tl.zeros([RED], dtype=tl.float32)
    for n0 in range(0, N, RED):
        acc += tl.load(ptr + n0 + rows, mask=(n0 + rows) < N, other=0.0)
    return tl.sum(acc, axis=0)


@triton.jit
def _max_chunks(ptr, N, RED: tl.constexpr):
    rows = tl.arange(0, RED)
    acc = tl.full([RED], float("-inf"), tl.float32)
    for n0 in range(0, N, RED):
        acc = tl.maximum(acc, tl.load(ptr + n0 + rows, mask=(n0 + rows) < N, other=float("-inf")))
    return tl.max(acc, axis=0)


@triton.jit
def _k_step(lo, hi, cnt, k, WAYS: tl.constexpr):
    """The one-program kernel's top-k update: candidates lo + j * step from (lo, hi), their counts `cnt`."""
    ways = tl.arange(0, WAYS).to(tl.int64)
    step = (hi - lo + WAYS) // WAYS
    ok = (cnt >= k) & (lo + ways * step <= hi)
    j = tl.max(tl.where(ok, ways, 0), axis=0)
    new_lo = lo + j * step
    return new_lo, tl.minimum(hi, new_lo + step - 1)


@triton.jit
def _p_step(lo, hi, mass, inv_z, p, WAYS: tl.constexpr):
    """The one-program kernel's top-p update: candidates lo + (j + 1) * step - 1 (the last clamped to hi),
    `mass` their unnormalized masses above."""
    ways = tl.arange(0, WAYS).to(tl.int64)
    step = (hi - lo + WAYS) // WAYS
    below = (mass * inv_z < p) | (ways == WAYS - 1)
    j = tl.min(tl.where(below, ways, WAYS - 1), axis=0)
    return lo + j * step, tl.minimum(lo + (j + 1) * step - 1, hi)


_RADIX_BINS = 256  # TOPK_RADIX: one byte of the key a pass (4 passes for 32 bits)


@triton.jit
def _radix_step(prefix, rank, hist, BINS: tl.constexpr):
    """Radix select's update from the summed histogram of the next byte (over the keys under `prefix`): the bin
    b holding the rank-th largest of those keys (repeats counted), the prefix extended by b, the rank within b."""
    bins = tl.arange(0, BINS)
    at_or_above = tl.sum(hist, 0) - tl.cumsum(hist, 0) + hist          # keys in bins >= b
    b = tl.max(tl.where(at_or_above >= rank, bins, 0), 0)
    above = tl.sum(tl.where(bins > b, hist, 0), 0)
    return prefix.to(tl.int64) * BINS + b, rank - above


@triton.jit
def _split_topk_radix_kernel(x_ptr, k_ptr, V, stride_x, CH, N, mx_ptr, h_in, h_out, st_in, st_out, tmx_ptr, NT,
                             BLOCK_V: tl.constexpr, BINS: tl.constexpr, RED: tl.constexpr, SHIFT: tl.constexpr,
                             FIRST: tl.constexpr, TILE_SKIP: tl.constexpr = False, USE_PDL: tl.constexpr = False):
    """TOPK_RADIX: the histogram of key byte SHIFT / 8 over chunk c of row b, counting only the keys whose bits
    above it are the prefix chosen so far (the first pass: every key, and it keeps the chunk's max). Keys are
    the order-preserving int32 keys with the sign bit flipped, so they order as unsigned integers."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = tl.arange(0, BLOCK_V)
    bins = tl.arange(0, BINS)
    if FIRST:
        prefix = tl.full([], 0, tl.int64)
        rank = tl.minimum(tl.maximum(tl.load(k_ptr + row), 1), V)
    else:
        hist = _sum_parts(h_in + row * N * BINS, N, BINS, RED)
        prefix, rank = _radix_step(tl.load(st_in + row * 4), tl.load(st_in + row * 4 + 1), hist, BINS)
    want = prefix.to(tl.uint32)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    start = c * CH
    end = tl.minimum(start + CH, V)
    h = tl.zeros([BINS], dtype=tl.int32)
    outside = tl.zeros([BLOCK_V], dtype=tl.int32)
    mx = tl.full([BLOCK_V], float("-inf"), tl.float32)
    for off in range(start, end, BLOCK_V):
        mask = off + cols < end
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        u = (_float_to_key(x) ^ -2147483648).to(tl.uint32, bitcast=True)
        if FIRST:
            in_play = mask
        else:
            in_play = mask & ((u >> (SHIFT + 8)) == want)
        # keys out of play are binned at 0 and taken back out after the loop (one count a lane)
        h += tl.histogram(tl.where(in_play, (u >> SHIFT) & 0xFF, 0).to(tl.int32), BINS)
        outside += (in_play == 0).to(tl.int32)
        if FIRST:
            mx = tl.maximum(mx, x)
            if TILE_SKIP:
                tl.store(tmx_ptr + row * NT + off // BLOCK_V, tl.max(x, axis=0))
    h -= tl.where(bins == 0, tl.sum(outside, 0), 0)
    tl.store(h_out + (row * N + c) * BINS + bins, h)
    if FIRST:
        tl.store(mx_ptr + row * N + c, tl.max(mx, axis=0))
    if c == 0:
        tl.store(st_out + row * 4, prefix.to(tl.int32))          # at most 24 bits before the last byte
        tl.store(st_out + row * 4 + 1, rank.to(tl.int32))


@triton.jit
def _split_topk_kernel(x_ptr, k_ptr, V, stride_x, CH, N, mx_ptr, cnt_in, cnt_out, st_in, st_out, tmx_ptr, NT,
                       BLOCK_V: tl.constexpr, WAYS: tl.constexpr, RED: tl.constexpr, FIRST: tl.constexpr,
                       LOCAL_ACC: tl.constexpr, TILE_SKIP: tl.constexpr = False, USE_PDL: tl.constexpr = False):
    """One top-k pass over chunk c of row b: apply the previous pass's summed counts, count this pass's
    candidates in the chunk (the first pass starts from the whole float range and keeps the chunk's max)."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = tl.arange(0, BLOCK_V)
    ways = tl.arange(0, WAYS).to(tl.int64)
    if FIRST:
        lo = tl.full([], -2139095041, tl.int64)      # key(-inf) = 0xFF800000 ^ 0x7FFFFFFF: count(x >= -inf) = V >= k
        hi = tl.full([], 2139095040, tl.int64)       # key(+inf) = 0x7F800000
    else:
        lo = tl.load(st_in + row * 4).to(tl.int64)
        hi = tl.load(st_in + row * 4 + 1).to(tl.int64)
        cnt = _sum_parts(cnt_in + row * N * WAYS, N, WAYS, RED)
        lo, hi = _k_step(lo, hi, cnt, tl.load(k_ptr + row), WAYS)
    step = (hi - lo + WAYS) // WAYS
    tf = _key_to_float(tl.minimum(lo + ways * step, hi).to(tl.int32))
    x_row = x_ptr + row.to(tl.int64) * stride_x
    start = c * CH
    end = tl.minimum(start + CH, V)
    cnt = tl.zeros([WAYS], dtype=tl.int32)
    cnt_2d = tl.zeros([BLOCK_V, WAYS], dtype=tl.int32)
    mx = tl.full([BLOCK_V], float("-inf"), tl.float32)
    for off in range(start, end, BLOCK_V):
        # padding reads -inf: it can only count for a candidate at -inf, which is j = 0 (lo), always taken
        x = tl.load(x_row + off + cols, mask=off + cols < end, other=float("-inf"))
        if LOCAL_ACC:
            cnt_2d += (x[:, None] >= tf[None, :]).to(tl.int32)
        else:
            cnt += tl.sum((x[:, None] >= tf[None, :]).to(tl.int32), axis=0)
        if FIRST:
            mx = tl.maximum(mx, x)
            if TILE_SKIP:
                tl.store(tmx_ptr + row * NT + off // BLOCK_V, tl.max(x, axis=0))
    if LOCAL_ACC:
        cnt = tl.sum(cnt_2d, axis=0)
    tl.store(cnt_out + (row * N + c) * WAYS + ways, cnt)
    if FIRST:
        tl.store(mx_ptr + row * N + c, tl.max(mx, axis=0))
    if c == 0:
        tl.store(st_out + row * 4, lo.to(tl.int32))
        tl.store(st_out + row * 4 + 1, hi.to(tl.int32))


@triton.jit
def _topp_tile(x_row, off, cols, end, t_k, top, tf, acc_2d, acc, z, FIRST: tl.constexpr, LOCAL_ACC: tl.constexpr):
    """One tile of a top-p pass: the masses above each cut tf (and the first pass's normalizer part)."""
    x = tl.load(x_row + off + cols, mask=off + cols < end, other=float("-inf"))
    e = tl.where(x >= t_k, tl.exp(x - top), 0.0)       # padding: exp(-inf) = 0
    if LOCAL_ACC:
        acc_2d += tl.where(x[:, None] > tf[None, :], e[:, None], 0.0)
    else:
        acc += tl.sum(tl.where(x[:, None] > tf[None, :], e[:, None], 0.0), axis=0)
    if FIRST:
        z += e
    return acc_2d, acc, z


@triton.jit
def _split_topp_kernel(x_ptr, k_ptr, p_ptr, V, stride_x, CH, N, mx_ptr, z_ptr, cnt_in, acc_in, acc_out,
                       st_in, st_out, tmx_ptr, NT, BLOCK_V: tl.constexpr, WAYS: tl.constexpr, RED: tl.constexpr,
                       FIRST: tl.constexpr, LOCAL_ACC: tl.constexpr, RADIX: tl.constexpr = 0,
                       BINS: tl.constexpr = 256, TILE_SKIP: tl.constexpr = False, USE_PDL: tl.constexpr = False):
    """One top-p pass over chunk c of row b. The first finishes t_k from the last top-k counts (RADIX: the
    last byte's histograms, in cnt_in) and also sums the chunk's part of the normalizer; the others apply the
    previous pass's summed masses."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = tl.arange(0, BLOCK_V)
    ways = tl.arange(0, WAYS).to(tl.int64)
    top = _max_chunks(mx_ptr + row * N, N, RED)
    lo = tl.load(st_in + row * 4).to(tl.int64)
    hi = tl.load(st_in + row * 4 + 1).to(tl.int64)
    if FIRST:
        if RADIX:
            hist = _sum_parts(cnt_in + row * N * BINS, N, BINS, RED)
            key_u, _ = _radix_step(tl.load(st_in + row * 4), tl.load(st_in + row * 4 + 1), hist, BINS)
            lo = key_u - 2147483648                  # the unsigned key back to the signed one
        else:
            cnt = _sum_parts(cnt_in + row * N * WAYS, N, WAYS, RED)
            lo, hi = _k_step(lo, hi, cnt, tl.load(k_ptr + row), WAYS)
        lo_tk = lo
        hi = _float_to_key(top).to(tl.int64)
    else:
        lo_tk = tl.load(st_in + row * 4 + 2).to(tl.int64)
        mass = _sum_parts(acc_in + row * N * WAYS, N, WAYS, RED)
        inv_z = 1.0 / _sum_chunks(z_ptr + row * N, N, RED)
        lo, hi = _p_step(lo, hi, mass, inv_z, tl.load(p_ptr + row), WAYS)
    t_k = _key_to_float(lo_tk.to(tl.int32))
    step = (hi - lo + WAYS) // WAYS
    tf = _key_to_float(tl.minimum(lo + (ways + 1) * step - 1, hi).to(tl.int32))
    x_row = x_ptr + row.to(tl.int64) * stride_x
    start = c * CH
    end = tl.minimum(start + CH, V)
    acc = tl.zeros([WAYS], dtype=tl.float32)
    acc_2d = tl.zeros([BLOCK_V, WAYS], dtype=tl.float32)
    z = tl.zeros([BLOCK_V], dtype=tl.float32)
    # TILE_SKIP: a tile adds nothing where its max is below t_k (every e is 0), in a later pass where it is at most
    # the lowest cut (x > tf nowhere; z is summed in the first only), and where p >= 1 (top-p is off: the write
    # pass keeps x >= t_k without these sums). Skipping it leaves every sum the same, bit for bit.
    skip_row = tl.load(p_ptr + row) >= 1.0
    tf_low = tl.min(tf, axis=0)
    for off in range(start, end, BLOCK_V):
        if TILE_SKIP:
            tmax = tl.load(tmx_ptr + row * NT + off // BLOCK_V)
            live = (tmax >= t_k) if FIRST else (tmax > tf_low)
            if (live.to(tl.int32) - skip_row.to(tl.int32)) > 0:
                acc_2d, acc, z = _topp_tile(x_row, off, cols, end, t_k, top, tf, acc_2d, acc, z, FIRST, LOCAL_ACC)
        else:
            acc_2d, acc, z = _topp_tile(x_row, off, cols, end, t_k, top, tf, acc_2d, acc, z, FIRST, LOCAL_ACC)
    if LOCAL_ACC:
        acc = tl.sum(acc_2d, axis=0)
    tl.store(acc_out + (row * N + c) * WAYS + ways, acc)
    if FIRST:
        tl.store(z_ptr + row * N + c, tl.sum(z, axis=0))
    if c == 0:
        tl.store(st_out + row * 4, lo.to(tl.int32))
        tl.store(st_out + row * 4 + 1, hi.to(tl.int32))
        tl.store(st_out + row * 4 + 2, lo_tk.to(tl.int32))


@triton.jit
def _split_write_kernel(x_ptr, p_ptr, y_ptr, V, stride_x, stride_y, CH, N, z_ptr, acc_in, st_in, tmx_ptr, NT,
                        BLOCK_V: tl.constexpr, WAYS: tl.constexpr, RED: tl.constexpr,
                        TILE_SKIP: tl.constexpr = False, USE_PDL: tl.constexpr = False):
    """The last pass: apply the last top-p masses, then write chunk c of row b (x where x >= the threshold)."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = tl.arange(0, BLOCK_V)
    lo = tl.load(st_in + row * 4).to(tl.int64)
    hi = tl.load(st_in + row * 4 + 1).to(tl.int64)
    t_k = _key_to_float(tl.load(st_in + row * 4 + 2))
    p = tl.load(p_ptr + row)
    mass = _sum_parts(acc_in + row * N * WAYS, N, WAYS, RED)
    inv_z = 1.0 / _sum_chunks(z_ptr + row * N, N, RED)
    lo, hi = _p_step(lo, hi, mass, inv_z, p, WAYS)
    thr = tl.where(p >= 1.0, t_k, _key_to_float(lo.to(tl.int32)))
    x_row = x_ptr + row.to(tl.int64) * stride_x
    y_row = y_ptr + row.to(tl.int64) * stride_y
    start = c * CH
    end = tl.minimum(start + CH, V)
    for off in range(start, end, BLOCK_V):
        mask = off + cols < end
        if TILE_SKIP:
            # a tile whose max is below the threshold is all -inf: written without reading it
            keep = tl.load(tmx_ptr + row * NT + off // BLOCK_V) >= thr
            x = tl.load(x_row + off + cols, mask=mask & (cols < tl.where(keep, BLOCK_V, 0)), other=float("-inf"))
        else:
            x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        tl.store(y_row + off + cols, tl.where(x >= thr, x, float("-inf")), mask=mask)


def _split_settings(B: int) -> dict:
    """CONFIGS as a [B, V] call's split path reads them: MANY_ROWS's entries over the rest from MANY_ROWS_MIN_B
    rows, and LARGE_B's over those from LARGE_B_MIN rows."""
    cfg = dict(CONFIGS)
    if CONFIGS["MANY_ROWS_MIN_B"] and B >= CONFIGS["MANY_ROWS_MIN_B"]:
        cfg.update(CONFIGS["MANY_ROWS"])
    if CONFIGS["LARGE_B_MIN"] and B >= CONFIGS["LARGE_B_MIN"]:
        cfg.update(CONFIGS["LARGE_B"])
    return cfg


def _split_chunks(B: int, V: int) -> tuple[int, int] | None:
    """(N chunks, chunk length) of the split path for a [B, V] call, or None for one program per row."""
    cfg = _split_settings(B)
    if B > cfg["SPLIT_MAX_B"]:
        return None
    if cfg["SPLITS"]:
        n = cfg["SPLITS"]
    else:
        n = max(1, cfg["SPLIT_PROGRAMS"] // B)
        if cfg["SPLIT_MAX_CHUNKS"] > 0:
            n = min(n, cfg["SPLIT_MAX_CHUNKS"])
    ch = triton.cdiv(triton.cdiv(V, n), cfg["SPLIT_BLOCK_V"]) * cfg["SPLIT_BLOCK_V"]   # whole tiles
    n = triton.cdiv(V, ch)
    return (n, ch) if n >= 2 else None


def _split_filter(logits, k, p, y, N: int, CH: int) -> None:
    B, V = logits.shape
    cfg = _split_settings(B)
    ways, block = cfg["SPLIT_WAYS"], cfg["SPLIT_BLOCK_V"]
    passes = _passes(ways)
    # one int32 workspace: counts and masses [2, B, N, WAYS] (double-buffered), chunk maxima and normalizer
    # parts [B, N], per-row state [2, B, 4] (lo, hi, key of t_k; written by chunk 0, read by the next launch)
    nw, nc = 2 * B * N * ways, B * N
    ws = torch.empty(2 * nw + 2 * nc + 8 * B, dtype=torch.int32, device=logits.device)
    cnt = ws[:nw].view(2, -1)
    acc = ws[nw:2 * nw].view(torch.float32).view(2, -1)
    mx = ws[2 * nw:2 * nw + nc].view(torch.float32)
    z = ws[2 * nw + nc:2 * nw + 2 * nc].view(torch.float32)
    st = ws[2 * nw + 2 * nc:].view(2, -1)
    grid = (B, N)
    pdl = _pdl(logits, cfg)
    meta = dict(BLOCK_V=block, WAYS=ways, RED=_RED, num_warps=cfg["SPLIT_num_warps"])
    local = dict(LOCAL_ACC=cfg["LOCAL_ACC"])
    radix = 1 if cfg["TOPK_RADIX"] else 0
    # TILE_SKIP: the first top-k pass keeps every tile's max ([B, NT]) for the top-p and write passes to skip by
    skip = bool(cfg["TILE_SKIP"])
    nt = N * (CH // block)
    tmx = torch.empty(B * nt, dtype=torch.float32, device=logits.device) if skip else mx
    tiles = dict(TILE_SKIP=skip)
    t = 0                                          # launch index: reads buffer (t - 1) % 2, writes t % 2
    if radix:
        # the chunk histograms of the 4 byte passes, double-buffered like the counts ([2, B, N, 256])
        cnt = torch.empty((2, B * N * _RADIX_BINS), dtype=torch.int32, device=logits.device)
        for i, shift in enumerate((24, 16, 8, 0)):
            _split_topk_radix_kernel[grid](logits, k, V, logits.stride(0), CH, N, mx, cnt[(t - 1) % 2], cnt[t % 2],
                                           st[(t - 1) % 2], st[t % 2], tmx, nt, BLOCK_V=block, BINS=_RADIX_BINS,
                                           RED=_RED, SHIFT=shift, FIRST=i == 0, **tiles, USE_PDL=pdl, launch_pdl=pdl,
                                           num_warps=cfg["SPLIT_num_warps"])
            t += 1
    else:
        for i in range(passes):
            _split_topk_kernel[grid](logits, k, V, logits.stride(0), CH, N, mx, cnt[(t - 1) % 2], cnt[t % 2],
                                     st[(t - 1) % 2], st[t % 2], tmx, nt, FIRST=i == 0, **meta, **local, **tiles,
                                     USE_PDL=pdl, launch_pdl=pdl)
            t += 1
    for i in range(passes):
        _split_topp_kernel[grid](logits, k, p, V, logits.stride(0), CH, N, mx, z, cnt[(t - 1) % 2],
                                 acc[(t - 1) % 2], acc[t % 2], st[(t - 1) % 2], st[t % 2], tmx, nt, FIRST=i == 0,
                                 **meta, **local, RADIX=radix if i == 0 else 0, BINS=_RADIX_BINS, **tiles,
                                 USE_PDL=pdl, launch_pdl=pdl)
        t += 1
    _split_write_kernel[grid](logits, p, y, V, logits.stride(0), y.stride(0), CH, N, z, acc[(t - 1) % 2],
                              st[(t - 1) % 2], tmx, nt, **meta, **tiles, USE_PDL=pdl, launch_pdl=pdl)


# ---- the bins path: two reads of the logits and one write, whatever the filters ------------------------------

_BIN_GRID_LIMIT = tl.constexpr(536870912.0)  # 2^29: x * BIN_SCALE clamped here before the int conversion (±inf too)
_BIN_NO_ANCHOR = tl.constexpr(-1073741824)   # below every clamped grid index: a chunk's anchor before its first tile
_BIN_WILD = tl.constexpr(524288.0)   # |row max| from here: bin edges are not exact in fp32, the row is searched whole
_BIN_SLACK = tl.constexpr(1e-4)      # mass kept between a bound and p (fp32 sums err by ~1e-6; the margin is 1e-3)
_DEC_WORDS = tl.constexpr(8)         # a row's decision: M, Z, A, j_c, j_x, rank, n_amb, flags (int32 words)


@triton.jit
def _grid_index(x, SCALE: tl.constexpr):
    """floor(x * SCALE) as int32: monotone in x (SCALE a power of 2, so the product is exact), ±inf clamped."""
    return tl.floor(tl.minimum(tl.maximum(x * SCALE, -_BIN_GRID_LIMIT), _BIN_GRID_LIMIT)).to(tl.int32)


@triton.jit
def _bin_of(x, anchor, NB: tl.constexpr, SCALE: tl.constexpr):
    """Bins count down from the anchor (the grid index of a maximum): bin 0 holds the top 1/SCALE of a logit
    unit, bin NB - 1 everything from NB - 1 grid steps below it down (-inf too)."""
    return tl.minimum(tl.maximum(anchor - _grid_index(x, SCALE), 0), NB - 1)


@triton.jit
def _evicted(anchor, new_anchor, NB: tl.constexpr):
    """Ring histograms: slot i holds grid index anchor - ((anchor - i) mod NB), the one of the NB indices up to the
    anchor that is i mod NB, so moving the anchor rewrites no slot. True where that index falls below the window
    of a new anchor (<= new_anchor - NB): the slots whose counts move to the count below the window.
    anchor [R, 1] or scalar; NB a power of 2 (& takes the residue of negative numbers too)."""
    i = tl.arange(0, NB)
    held = anchor - ((anchor - i) & (NB - 1))
    return held <= new_anchor - NB


@triton.jit
def _bins_stats_kernel(x_ptr, V, stride_x, CH, N, m_ptr, z_ptr, a_ptr, l_ptr, h_ptr, BLOCK_V: tl.constexpr,
                       NB: tl.constexpr, SCALE: tl.constexpr, PREFETCH: tl.constexpr = 0,
                       USE_PDL: tl.constexpr = False):
    """Read 1, chunk c of row b: its max, its softmax normalizer part (relative to that max) and the counts of
    its logits by grid index (floor(x * SCALE)) over the NB indices up to its own anchor (the grid index of its
    max so far), in a ring, with one count of everything below that window. The lowest index of the window
    takes the entries below it as they come (its slot holds "at most this index"); a tile that raises the
    anchor moves the slots that fall out of the window into the count below, so one read gives all three."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = tl.arange(0, BLOCK_V)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    start = c * CH
    end = tl.minimum(start + CH, V)
    m = tl.full([], float("-inf"), tl.float32)
    anchor = tl.full([], _BIN_NO_ANCHOR, tl.int32)
    z = tl.zeros([BLOCK_V], dtype=tl.float32)
    h = tl.zeros([NB], dtype=tl.int32)
    below = tl.zeros([], dtype=tl.int32)
    outside = tl.zeros([BLOCK_V], dtype=tl.int32)
    if PREFETCH:
        nxt = tl.load(x_row + start + cols, mask=start + cols < end, other=float("-inf"))
    for off in range(start, end, BLOCK_V):
        mask = off + cols < end
        if PREFETCH:    # the next tile's load goes out before this tile's reductions wait at their barriers
            x = nxt
            nxt = tl.load(x_row + off + BLOCK_V + cols, mask=off + BLOCK_V + cols < end, other=float("-inf"))
        else:
            x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        tmax = tl.max(x, axis=0)
        ta = _grid_index(tmax, SCALE)
        if ta > anchor:
            gone = _evicted(anchor, ta, NB)
            below += tl.sum(tl.where(gone, h, 0), axis=0)
            h = tl.where(gone, 0, h)
            anchor = ta
        m_new = tl.maximum(m, tmax)
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        z = z * alpha + tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
        # padding (-inf) lands in the lowest slot and is taken back out after the loop (one count a lane)
        h += tl.histogram(tl.maximum(_grid_index(x, SCALE), anchor - NB + 1) & (NB - 1), NB)
        outside += (mask == 0).to(tl.int32)
    slots = tl.arange(0, NB)
    h -= tl.where(slots == ((anchor + 1) & (NB - 1)), tl.sum(outside, axis=0), 0)    # (anchor - NB + 1) mod NB
    i = row * N + c
    tl.store(m_ptr + i, m)
    tl.store(z_ptr + i, tl.sum(z, axis=0))
    tl.store(a_ptr + i, anchor)
    tl.store(l_ptr + i, below)
    tl.store(h_ptr + i.to(tl.int64) * NB + slots, h)


@triton.jit
def _row_rings(a_ptr, l_ptr, h_ptr, row, c0, N, A, NB: tl.constexpr, RED: tl.constexpr):
    """Chunks c0 .. c0 + RED - 1 of a row, brought to the row's anchor A: (their rings [RED, NB] with the slots
    below A's window emptied, their counts below it [RED]: their own and those slots')."""
    rr = tl.arange(0, RED)
    cm = c0 + rr < N
    ac = tl.load(a_ptr + row * N + c0 + rr, mask=cm, other=A)
    lc = tl.load(l_ptr + row * N + c0 + rr, mask=cm, other=0)
    slots = tl.arange(0, NB)[None, :]
    h = tl.load(h_ptr + (row * N + c0 + rr).to(tl.int64)[:, None] * NB + slots, mask=cm[:, None], other=0)
    gone = _evicted(ac[:, None], A, NB)
    return tl.where(gone, 0, h), lc + tl.sum(tl.where(gone, h, 0), axis=1)


@triton.jit
def _bins_decide_kernel(k_ptr, p_ptr, V, N, m_ptr, z_ptr, a_ptr, l_ptr, h_ptr, dec_ptr, off_ptr, CAP,
                        NB: tl.constexpr, SCALE: tl.constexpr, RED: tl.constexpr, TIGHT: tl.constexpr = 0,
                        USE_PDL: tl.constexpr = False):
    """One program a row: merge its chunks' statistics, then sort its bins into certainly kept (bins <= j_c),
    undecided (j_c < bin <= j_x) and certainly excluded (bins > j_x), and give each chunk the offset of its
    undecided entries in the row's buffer. Bin j holds grid index A - j (A the row's anchor), the last bin every
    index up to A - NB + 1. Bounds (bin j spans [A - j, A - j + 1) / SCALE, so exp(x - M) lies between the exps
    of its edges; the last bin has no lower edge):
      top-k: bins above the one holding the k-th largest are kept by it (count(>= x) <= k), bins below it
        are out; top-p: x in bin j is kept when even the upper bound of the mass of bins 0..j is < p times a
        lower bound of the kept normalizer, and out when the upper bound of the mass of bins > j is at most
        (1 - p) times the row's normalizer (then mass above x >= p under any top-k). With top-k on, x's kept
        normalizer needs every entry >= t_k, so its undecided bins reach down to t_k's bin. TIGHT (top-k off):
        each side's upper bound is also taken as Z less the other side's lower bound, the smaller of the two."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    rr = tl.arange(0, RED)
    M = tl.full([], float("-inf"), tl.float32)
    A = tl.full([], _BIN_NO_ANCHOR, tl.int32)
    for c0 in range(0, N, RED):
        cm = c0 + rr < N
        M = tl.maximum(M, tl.max(tl.load(m_ptr + row * N + c0 + rr, mask=cm, other=float("-inf")), axis=0))
        A = tl.maximum(A, tl.max(tl.load(a_ptr + row * N + c0 + rr, mask=cm, other=_BIN_NO_ANCHOR), axis=0))
    Z = tl.zeros([], dtype=tl.float32)
    ring = tl.zeros([NB], dtype=tl.int32)
    low = tl.zeros([], dtype=tl.int32)
    for c0 in range(0, N, RED):
        cm = c0 + rr < N
        mc = tl.load(m_ptr + row * N + c0 + rr, mask=cm, other=float("-inf"))
        zc = tl.load(z_ptr + row * N + c0 + rr, mask=cm, other=0.0)
        Z += tl.sum(tl.where(mc == float("-inf"), 0.0, zc * tl.exp(mc - M)), axis=0)
        h, lc = _row_rings(a_ptr, l_ptr, h_ptr, row, c0, N, A, NB, RED)
        ring += tl.sum(h, axis=0)
        low += tl.sum(lc, axis=0)
    i = tl.arange(0, NB)
    hist = tl.gather(ring, (A - i) & (NB - 1), 0) + tl.where(i == NB - 1, low, 0)      # slot of A - j -> bin j
    k = tl.minimum(tl.maximum(tl.load(k_ptr + row), 1), V)
    p = tl.load(p_ptr + row)
    topk = k < V
    topp = p < 1.0
    cum = tl.cumsum(hist, 0)
    j_k = tl.min(tl.where(cum >= k, i, NB - 1), axis=0)
    j_ck = tl.max(tl.where(cum <= k, i, -1), axis=0)
    # exp of the bin edges relative to M; (A + 1 - i) and M * SCALE are exact in fp32 below _BIN_WILD
    ms = M * SCALE
    up_e = tl.exp(((A + 1 - i).to(tl.float32) - ms) / SCALE) * (1.0 + 1e-5)
    low_e = tl.where(i == NB - 1, 0.0, tl.exp(((A - i).to(tl.float32) - ms) / SCALE) * (1.0 - 1e-5))
    ub = hist.to(tl.float32) * up_e
    lb = hist.to(tl.float32) * low_e
    cub = tl.cumsum(ub, 0)
    below = tl.cumsum(ub, 0, reverse=True) - ub
    if TIGHT:
        # With top-k off the kept normalizer is Z, so either side's mass is Z less the other's, and a side's bound
        # is tightest taken from the other side when that one holds less mass: at p = 0.8 the mass above a bin is
        # then known within e^(1/SCALE) of 0.2 Z, not of 0.8 Z (half the undecided entries at B = 256, 2026-12-06)
        tight = topk == 0
        cub = tl.where(tight, tl.minimum(cub, Z - (tl.cumsum(lb, 0, reverse=True) - lb)), cub)
        below = tl.where(tight, tl.minimum(below, Z - tl.cumsum(lb, 0)), below)
    z_low = tl.where(topk, tl.sum(tl.where(i <= j_ck, lb, 0.0), axis=0), Z * (1.0 - 1e-5))
    j_p = tl.min(tl.where(below <= (1.0 - p - _BIN_SLACK) * Z, i, NB - 1), axis=0)
    j_cp = tl.max(tl.where(cub < (p - _BIN_SLACK) * z_low, i, -1), axis=0)
    j_x = tl.where(topk, j_k, tl.where(topp, j_p, NB - 1))
    j_c = tl.where(topk, j_ck, NB - 1)
    j_c = tl.where(topp, tl.minimum(j_c, j_cp), j_c)
    j_c = tl.where(M == float("-inf"), NB - 1, j_c)          # a row of -inf: copied (every entry stays -inf)
    j_x = tl.where(M == float("-inf"), NB - 1, j_x)
    wild = tl.abs(M) >= _BIN_WILD
    wild = wild & (M != float("-inf"))
    j_c = tl.where(wild, -1, j_c)                              # no bounds: every entry undecided
    j_x = tl.where(wild, NB - 1, j_x)
    c_cert = tl.sum(tl.where(i <= j_c, hist, 0), axis=0)
    n_amb = tl.sum(tl.where(i <= j_x, hist, 0), axis=0) - c_cert
    spill = n_amb > CAP
    flags = topk.to(tl.int32) + 2 * topp.to(tl.int32) + 4 * spill.to(tl.int32)
    d = dec_ptr + row * _DEC_WORDS
    tl.store(d, M.to(tl.int32, bitcast=True))
    tl.store(d + 1, Z.to(tl.int32, bitcast=True))
    tl.store(d + 2, A)
    tl.store(d + 3, j_c)
    tl.store(d + 4, j_x)
    tl.store(d + 5, k - c_cert)                                 # t_k's rank among the undecided entries
    tl.store(d + 6, n_amb)
    tl.store(d + 7, flags)
    # each chunk's undecided entries go to the row's buffer after the earlier chunks' (no atomics: deterministic)
    base = tl.zeros([], dtype=tl.int32)
    slot_bin = ((A - i) & (NB - 1))[None, :]          # the bin of each slot's grid index under A
    clamp_undecided = ((NB - 1) > j_c) & ((NB - 1) <= j_x)
    for c0 in range(0, N, RED):
        h, lc = _row_rings(a_ptr, l_ptr, h_ptr, row, c0, N, A, NB, RED)
        cnt = tl.sum(tl.where((slot_bin > j_c) & (slot_bin <= j_x), h, 0), axis=1) + tl.where(clamp_undecided, lc, 0)
        tl.store(off_ptr + row * N + c0 + rr, base + tl.cumsum(cnt, 0) - cnt, mask=c0 + rr < N)
        base += tl.sum(cnt, axis=0)


@triton.jit
def _bins_write_kernel(x_ptr, y_ptr, V, stride_x, stride_y, CH, N, dec_ptr, off_ptr, s_ptr, bv_ptr, bi_ptr, CAP,
                       BLOCK_V: tl.constexpr, NB: tl.constexpr, SCALE: tl.constexpr, SKIP_EMPTY: tl.constexpr = 1,
                       PREFETCH: tl.constexpr = 0, USE_PDL: tl.constexpr = False):
    """Read 2 and the write, chunk c of row b: kept entries copied, the rest -inf; the undecided ones also go to
    the row's buffer (value and column) unless it overflows, and the chunk's exact mass of kept entries
    (exp(x - M)) is summed for the search."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = tl.arange(0, BLOCK_V)
    d = dec_ptr + row * _DEC_WORDS
    M = tl.load(d).to(tl.float32, bitcast=True)
    A = tl.load(d + 2)
    j_c = tl.load(d + 3)
    j_x = tl.load(d + 4)
    buffered = (tl.load(d + 7) & 4) == 0
    base = tl.load(off_ptr + row * N + c)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    y_row = y_ptr + row.to(tl.int64) * stride_y
    bv_row = bv_ptr + row.to(tl.int64) * CAP
    bi_row = bi_ptr + row.to(tl.int64) * CAP
    start = c * CH
    end = tl.minimum(start + CH, V)
    s = tl.zeros([BLOCK_V], dtype=tl.float32)
    if PREFETCH:
        nxt = tl.load(x_row + start + cols, mask=start + cols < end, other=float("-inf"))
    for off in range(start, end, BLOCK_V):
        mask = off + cols < end
        if PREFETCH:    # as in stats: the next tile in flight while this one's count crosses the warps
            x = nxt
            nxt = tl.load(x_row + off + BLOCK_V + cols, mask=off + BLOCK_V + cols < end, other=float("-inf"))
        else:
            x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        b = _bin_of(x, A, NB, SCALE)
        kept = b <= j_c
        tl.store(y_row + off + cols, tl.where(kept, x, float("-inf")), mask=mask)
        s += tl.where(kept & (x > float("-inf")), tl.exp(x - M), 0.0)
        undecided = mask & (b > j_c) & (b <= j_x) & buffered
        u = undecided.to(tl.int32)
        found = tl.sum(u, axis=0)
        # SKIP_EMPTY: a tile without undecided entries (most tiles of a row whose band is a few bins) skips the
        # compaction's scan, a second cross-warp pass over the tile
        if (found > 0) | (SKIP_EMPTY == 0):
            at = base + tl.cumsum(u, 0) - 1
            tl.store(bv_row + at, x, mask=undecided)
            tl.store(bi_row + at, off + cols, mask=undecided)
        base += found
    tl.store(s_ptr + row * N + c, tl.sum(s, axis=0))


@triton.jit
def _undecided_tile(x_row, bv_row, bi_row, off, cols, n, V, spill, A, j_c, j_x, NB: tl.constexpr,
                    SCALE: tl.constexpr):
    """Tile `off` of a row's undecided entries: (values, columns, valid), from its buffer, or when the buffer
    overflowed from the row itself (filtered by bin)."""
    if spill:
        m = off + cols < V
        v = tl.load(x_row + off + cols, mask=m, other=float("-inf"))
        b = _bin_of(v, A, NB, SCALE)
        valid = m & (b > j_c) & (b <= j_x)
        col = off + cols
    else:
        valid = off + cols < n
        v = tl.load(bv_row + off + cols, mask=valid, other=float("-inf"))
        col = tl.load(bi_row + off + cols, mask=valid, other=0)
    return v, col, valid


@triton.jit
def _bins_search_kernel(x_ptr, y_ptr, p_ptr, V, stride_x, stride_y, N, dec_ptr, s_ptr, bv_ptr, bi_ptr, CAP,
                        BLOCK: tl.constexpr, WAYS: tl.constexpr, NB: tl.constexpr, SCALE: tl.constexpr,
                        RED: tl.constexpr, SORT_MAX: tl.constexpr = 0, USE_PDL: tl.constexpr = False):
    """One program a row: the exact threshold among its undecided entries (the kept entries' exact mass S_cert
    lies above every one of them), by a sort in registers when at most BLOCK are buffered, or at most SORT_MAX
    (a wider sort, compiled beside the first when SORT_MAX > BLOCK), else by the multi-way key search of the other
    paths; then the undecided entries >= it written over the -inf the write pass left."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    d = dec_ptr + row * _DEC_WORDS
    n = tl.load(d + 6)
    if n > 0:
        M = tl.load(d).to(tl.float32, bitcast=True)
        Z = tl.load(d + 1).to(tl.float32, bitcast=True)
        A = tl.load(d + 2)
        j_c = tl.load(d + 3)
        j_x = tl.load(d + 4)
        rank = tl.load(d + 5)
        flags = tl.load(d + 7)
        topk = (flags & 1) != 0
        topp = (flags & 2) != 0
        spill = (flags & 4) != 0
        p = tl.load(p_ptr + row)
        s_cert = _sum_chunks(s_ptr + row * N, N, RED)
        cols = tl.arange(0, BLOCK)
        x_row = x_ptr + row.to(tl.int64) * stride_x
        bv_row = bv_ptr + row.to(tl.int64) * CAP
        bi_row = bi_ptr + row.to(tl.int64) * CAP
        lim = tl.where(spill, V, n)
        thr = tl.full([], float("-inf"), tl.float32)
        if (n <= BLOCK) & (spill == 0):
            thr = _sorted_threshold(bv_row, n, rank, topk, topp, p, M, Z, s_cert, BLOCK)
        elif SORT_MAX > BLOCK:
            # top-p-only rows with p near 0.8 buffer 1000-3000 entries (B = 256, 2026-12-06): the key search's
            # passes over them made the slowest programs of the launch
            if (n <= SORT_MAX) & (spill == 0):
                thr = _sorted_threshold(bv_row, n, rank, topk, topp, p, M, Z, s_cert, SORT_MAX)
            else:
                thr = _searched_threshold(x_row, bv_row, bi_row, n, V, lim, spill, A, j_c, j_x, rank, topk, topp, p,
                                          M, Z, s_cert, BLOCK, WAYS, NB, SCALE)
        else:
            thr = _searched_threshold(x_row, bv_row, bi_row, n, V, lim, spill, A, j_c, j_x, rank, topk, topp, p, M,
                                      Z, s_cert, BLOCK, WAYS, NB, SCALE)
        y_row = y_ptr + row.to(tl.int64) * stride_y
        for off in range(0, lim, BLOCK):
            v, col, valid = _undecided_tile(x_row, bv_row, bi_row, off, cols, n, V, spill, A, j_c, j_x, NB, SCALE)
            tl.store(y_row + col, v, mask=valid & (v >= thr))


@triton.jit
def _sorted_threshold(bv_row, n, rank, topk, topp, p, M, Z, s_cert, BLOCK: tl.constexpr):
    """The threshold among at most BLOCK buffered undecided entries, sorted in registers (one pass, no search):
    t_k is the rank-th largest; under the kept normalizer an entry stays when S_cert and the mass of the sorted
    entries before it are < p times it. Tied entries stay together: the mass before the first of a tie group is
    the smallest of the group's, so the least value that passes is the whole group's."""
    pos = tl.arange(0, BLOCK)
    valid = pos < n
    srt = tl.sort(tl.load(bv_row + pos, mask=valid, other=float("-inf")), descending=True)
    thr = tl.full([], float("-inf"), tl.float32)
    if topk:
        t_k = tl.max(tl.where(pos == rank - 1, srt, float("-inf")), axis=0)
        thr = tl.where(rank > 0, t_k, float("inf"))
    e = tl.where(valid & (srt >= thr), tl.exp(srt - M), 0.0)
    if topp:
        zk = Z
        if topk:
            zk = s_cert + tl.sum(e, axis=0)
        above = s_cert + tl.cumsum(e, 0) - e
        stays = valid & (srt >= thr) & (above < p * zk)
        thr = tl.min(tl.where(stays, srt, float("inf")), axis=0)
    return thr


@triton.jit
def _searched_threshold(x_row, bv_row, bi_row, n, V, lim, spill, A, j_c, j_x, rank, topk, topp, p, M, Z, s_cert,
                        BLOCK: tl.constexpr, WAYS: tl.constexpr, NB: tl.constexpr, SCALE: tl.constexpr):
    """The threshold among the undecided entries by the multi-way key search, a pass over them per step: for more
    than BLOCK buffered entries, or a row whose buffer overflowed (then read from the row itself)."""
    cols = tl.arange(0, BLOCK)
    ways = tl.arange(0, WAYS).to(tl.int64)
    vmax = tl.full([], float("-inf"), tl.float32)
    vmin = tl.full([], float("inf"), tl.float32)
    for off in range(0, lim, BLOCK):
        v, col, valid = _undecided_tile(x_row, bv_row, bi_row, off, cols, n, V, spill, A, j_c, j_x, NB, SCALE)
        vmax = tl.maximum(vmax, tl.max(tl.where(valid, v, float("-inf")), axis=0))
        vmin = tl.minimum(vmin, tl.min(tl.where(valid, v, float("inf")), axis=0))
    thr = tl.full([], float("-inf"), tl.float32)
    if topk:
        # t_k: the rank-th largest undecided entry (rank <= 0: the kept ones already hold k entries)
        lo = _float_to_key(vmin).to(tl.int64)
        hi = _float_to_key(vmax).to(tl.int64)
        while lo < hi:
            step = (hi - lo + WAYS) // WAYS
            tf = _key_to_float(tl.minimum(lo + ways * step, hi).to(tl.int32))
            cnt = tl.zeros([WAYS], dtype=tl.int32)
            for off in range(0, lim, BLOCK):
                v, col, valid = _undecided_tile(x_row, bv_row, bi_row, off, cols, n, V, spill, A, j_c, j_x,
                                                NB, SCALE)
                cnt += tl.sum((valid[:, None] & (v[:, None] >= tf[None, :])).to(tl.int32), axis=0)
            lo, hi = _k_step(lo, hi, cnt, rank, WAYS)
        thr = tl.where(rank > 0, _key_to_float(lo.to(tl.int32)), float("inf"))
    if topp:
        # the kept normalizer: the row's with top-k off; else S_cert and the undecided entries >= t_k
        zk = Z
        if topk:
            zk = s_cert
            for off in range(0, lim, BLOCK):
                v, col, valid = _undecided_tile(x_row, bv_row, bi_row, off, cols, n, V, spill, A, j_c, j_x,
                                                NB, SCALE)
                zk += tl.sum(tl.where(valid & (v >= thr), tl.exp(v - M), 0.0), axis=0)
        # t_p: the smallest key t >= thr with S_cert + mass(undecided > t) < p * zk; none when S_cert alone
        # reaches it (every undecided entry is out)
        inv_z = 1.0 / zk
        lo = _float_to_key(tl.maximum(thr, vmin)).to(tl.int64)
        hi = _float_to_key(vmax).to(tl.int64)
        hi = tl.maximum(hi, lo)
        while lo < hi:
            step = (hi - lo + WAYS) // WAYS
            tf = _key_to_float(tl.minimum(lo + (ways + 1) * step - 1, hi).to(tl.int32))
            mass = tl.zeros([WAYS], dtype=tl.float32) + s_cert
            for off in range(0, lim, BLOCK):
                v, col, valid = _undecided_tile(x_row, bv_row, bi_row, off, cols, n, V, spill, A, j_c, j_x,
                                                NB, SCALE)
                e = tl.where(valid & (v >= thr), tl.exp(v - M), 0.0)
                mass += tl.sum(tl.where(v[:, None] > tf[None, :], e[:, None], 0.0), axis=0)
            lo, hi = _p_step(lo, hi, mass, inv_z, p, WAYS)
        thr = tl.where(s_cert * inv_z < p, tl.maximum(thr, _key_to_float(lo.to(tl.int32))), float("inf"))
    return thr


def _bins_chunks(B: int, V: int) -> tuple[int, int]:
    """(N chunks, chunk length) of the bins path for a [B, V] call: BIN_PROGRAMS // B chunks a row, at most
    BIN_MAX_CHUNKS, of whole BIN_BLOCK_V tiles."""
    cfg = CONFIGS
    n = max(1, min(cfg["BIN_PROGRAMS"] // B, cfg["BIN_MAX_CHUNKS"]))
    ch = triton.cdiv(triton.cdiv(V, n), cfg["BIN_BLOCK_V"]) * cfg["BIN_BLOCK_V"]
    return triton.cdiv(V, ch), ch


def _bins_filter(logits, k, p, y) -> None:
    B, V = logits.shape
    cfg = CONFIGS
    N, CH = _bins_chunks(B, V)
    nb, scale, cap = cfg["BIN_COUNT"], float(cfg["BIN_SCALE"]), cfg["BIN_CAP"]
    dev = logits.device
    # one int32 workspace: per chunk max, normalizer part, anchor, count below the window, offset, kept mass
    # [B, N]; rings [B, N, NB]; decisions [B, 8]; undecided values and columns [B, CAP]
    nc, nd = B * N, B * _DEC_WORDS.value
    ws = torch.empty(6 * nc + nc * nb + nd + 2 * B * cap, dtype=torch.int32, device=dev)
    m, z, a, low, off, s = (ws[i * nc:(i + 1) * nc] for i in range(6))
    m, z, s = m.view(torch.float32), z.view(torch.float32), s.view(torch.float32)
    h = ws[6 * nc:6 * nc + nc * nb]
    dec = ws[6 * nc + nc * nb:6 * nc + nc * nb + nd]
    bv = ws[6 * nc + nc * nb + nd:6 * nc + nc * nb + nd + B * cap].view(torch.float32)
    bi = ws[6 * nc + nc * nb + nd + B * cap:]
    pdl = _pdl(logits)
    bins = dict(NB=nb, SCALE=scale)
    reads = dict(BLOCK_V=cfg["BIN_BLOCK_V"], PREFETCH=cfg["BIN_PREFETCH"], num_warps=cfg["BIN_num_warps"])
    _bins_stats_kernel[(B, N)](logits, V, logits.stride(0), CH, N, m, z, a, low, h, **bins, **reads,
                               USE_PDL=pdl, launch_pdl=pdl)
    _bins_decide_kernel[(B,)](k, p, V, N, m, z, a, low, h, dec, off, cap, RED=cfg["BIN_RED"], **bins,
                              TIGHT=cfg["BIN_TIGHT"], USE_PDL=pdl, launch_pdl=pdl,
                              num_warps=cfg["BIN_DECIDE_num_warps"])
    _bins_write_kernel[(B, N)](logits, y, V, logits.stride(0), y.stride(0), CH, N, dec, off, s, bv, bi, cap,
                               SKIP_EMPTY=cfg["BIN_SKIP_EMPTY"], **bins, **reads, USE_PDL=pdl, launch_pdl=pdl)
    _bins_search_kernel[(B,)](logits, y, p, V, logits.stride(0), y.stride(0), N, dec, s, bv, bi, cap,
                              BLOCK=cfg["BIN_SEARCH_BLOCK"], WAYS=cfg["BIN_SEARCH_WAYS"], RED=_RED, **bins,
                              SORT_MAX=cfg["BIN_SORT_MAX"],
                              USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["BIN_SEARCH_num_warps"])

def _pdl(t, cfg=None) -> bool:
    """cfg["PDL"] (CONFIGS' by default; the split path passes its settings for B rows) on a GPU with programmatic
    dependent launch (compute capability 9 and later)."""
    return bool((cfg or CONFIGS)["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _passes(ways: int) -> int:
    """Passes that shrink a 2^32-wide key interval to one key, splitting it `ways` ways each time."""
    width, n = 1 << 32, 0
    while width > 1:
        width, n = -(-width // ways), n + 1
    return n


def top_k_top_p_filter(logits, k, p):
    if logits.dim() != 2 or k.shape != (logits.shape[0],) or p.shape != (logits.shape[0],):
        raise ValueError(f"top_k_top_p_filter expects logits[B,V], k[B], p[B]; got logits {tuple(logits.shape)}, "
                         f"k {tuple(k.shape)}, p {tuple(p.shape)}")
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    B, V = logits.shape
    y = torch.empty((B, V), dtype=torch.float32, device=logits.device)
    if B == 0 or V == 0:
        return y
    if CONFIGS["BIN_PATH"]:
        _bins_filter(logits, k, p, y)
        return y
    split = _split_chunks(B, V)
    if split is not None:
        _split_filter(logits, k, p, y, *split)
        return y
    ways = CONFIGS["WAYS"]
    pdl = _pdl(logits)
    _top_k_top_p_filter_kernel[(B,)](logits, k, p, y, V, logits.stride(0), y.stride(0),
                                     BLOCK_V=CONFIGS["BLOCK_V"], WAYS=ways, PASSES=_passes(ways), USE_PDL=pdl,
                                     launch_pdl=pdl, num_warps=CONFIGS["num_warps"])
    return y
