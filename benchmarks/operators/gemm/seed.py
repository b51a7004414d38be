"""Seed kernel for gemm(a[M,K], b[N,K]) -> a @ b.T: a tiled tl.dot matmul with an fp32 accumulator.

One program computes one BLOCK_M x BLOCK_N tile of the output (or one K-slice of it), walking K in
BLOCK_K steps. Tiles are numbered in groups of GROUP_M tile rows so that consecutive tiles share b
tiles (and a tiles) while they are still in L2. The tile comes from CONFIGS by the size of M:
- decode (M <= 64) is memory-bound: the weight b is streamed once, so tiles are thin in M, narrow in N
  (many programs, one per slice of b) and deep in K (few, long loads kept in flight by num_stages);
- prefill is compute-bound: 128x128 tiles, 5 stages (bf16 tl.dot compiles to Hopper wgmma).
Structural switches per bucket (constexpr), each with the earlier seed's path as the value 0/1:
- TMA=1 loads a and b tiles through host-built tensor descriptors (Hopper's bulk tensor copy engine,
  out-of-bounds rows and K tails filled with zeros) and stores c the same way; TMA=0 uses pointer
  loads. Falls back to pointers when a row stride is not a multiple of 16 bytes (TMA's rule).
- PERSISTENT=1 launches one program per SM that loops over the tiles (WARP_SPECIALIZE=1 asks the
  compiler to split producer and consumer warps in that loop; FLATTEN=1 lets it pipeline across tiles);
  PERSISTENT=0 launches one program per tile.
- SPLIT_K > 1 splits K among programs (more loads in flight when M is small and N has few tiles):
  partial sums go to an fp32 workspace and a second small kernel adds them and rounds once.
- STREAM_K=1 (the buckets up to M = 256) makes a call eligible for stream-K: up to one program an SM, each
  taking an equal share of its tile row's (tile column, K tile) iterations; a tile cut between programs is
  finished by the last of them, which adds the others' fp32 parts from a workspace once their flags say they
  are there (_gemm_stream_k_kernel). It runs where the tiles would leave a quarter of the SMs idle or more
  (stream_k_max_tile_share) and K is long (stream_k_min_k), the narrow-N projections: on the H200 (2026-12-04,
  agent/studies/gemm_stream_k.py, benchmarks/results/gemm_stream_k_records/) 1.07-1.70x faster on 27 of the 29
  such shapes of shapes.yaml (M64-N256-K7168 12.1 against 17.3 us, M1-N1280-K8192 13.4 against 20.1), none of
  them hot; with short K the fix-up costs more than the idle SMs it fills. Not where most SMs
  have a tile: M256-N7168-K8192 read 60.9 us against 52.1 with one 128 x 128 tile a program (cuBLAS 44.5), and
  54.0 with 112 programs (no tile cut), so cutting tiles cost more than the 20 idle SMs it filled; ncu counted
  every SM busy 87.6k cycles on average against the tile kernel's 63.7k (max 76.8k).
Ragged edges: with pointers, rows and columns past M or N are clamped into range for the loads (their
results are never stored) and the K tail is masked unless K is a multiple of BLOCK_K * SPLIT_K.
"""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# Tile configuration by the number of rows M: the first bucket whose bound is >= M is used.
# "min_programs": if the grid has fewer programs than this (most of an H200's 132 SMs), BLOCK_N
# and then BLOCK_M are halved (not below "min_block") so that every SM has a tile to work on.
CONFIGS = {
    "buckets": [
        (16, dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=256, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0,
                  WARP_SPECIALIZE=0, FLATTEN=0, STREAM_K=1, num_warps=4, num_stages=4)),
        (32, dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0,
                  WARP_SPECIALIZE=0, FLATTEN=0, STREAM_K=1, num_warps=4, num_stages=4)),
        (64, dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0,
                  WARP_SPECIALIZE=0, FLATTEN=0, STREAM_K=1, num_warps=4, num_stages=4)),
        # stream_k_tile: the tile stream-K uses in this bucket and the next (their own 128-row tiles leave one or two
        # tile rows: at M256-N512-K7168 stream-K read 31.2 us on 128 x 128, 16.1 on this tile, and one 128 x 128
        # tile a program 24.0; H200, 2026-12-04)
        (128, dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=0, PERSISTENT=0,
                   WARP_SPECIALIZE=0, FLATTEN=0, STREAM_K=1, num_warps=4, num_stages=4,
                   stream_k_tile=dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, TMA=1, num_warps=4, num_stages=4))),
        # 128 < M <= 256: 128x128x64, 4 warps, 5 stages (the best of a 48-config sweep, 2026-11-29) with
        # TMA loads: 52.1 us at M256-N7168-K8192 against 56.8 with pointer loads (the variant sweep of
        # agent/studies/measure_baselines.py on the H200, 2026-12-01; cuBLAS 45.0 in the same run).
        (256, dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0,
                   WARP_SPECIALIZE=0, FLATTEN=0, STREAM_K=1, num_warps=4, num_stages=5,
                   stream_k_tile=dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, TMA=1, num_warps=4, num_stages=4))),
        # M > 256: persistent 128x256x64 tiles through TMA, 8 warps, 3 stages: 1363 us at M8192-N7168-K8192
        # against 1679 for the non-persistent 128x128 tiles, 622 vs 799 at M4096-N7168-K8192, 639 vs 842 at
        # M8192-N8192-K3584 (same sweep, same run; cuBLAS 1364, 624, 659).
        (1 << 62, dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=1,
                       WARP_SPECIALIZE=0, FLATTEN=1, STREAM_K=0, num_warps=8, num_stages=3)),
    ],
    "min_programs": 100,
    # STREAM_K: the bounded wait for another program's part of a tile, in polls: a part that never comes leaves
    # NaN in its tile instead of hanging the GPU.
    "stream_k_max_spins": 1 << 22,
    # STREAM_K: at least this many K tiles a program (fewer programs than SMs when there is little work), so a
    # tile is not cut into more parts than its fix-up is worth (M256-N128-K4096 is 128 K tiles in all).
    "stream_k_min_iters": 8,
    # STREAM_K=1 marks a bucket's calls eligible; stream-K runs when K >= stream_k_min_k and its tiles (the bucket's
    # tile, or its stream_k_tile) number at most stream_k_max_tile_share of the SMs, so a quarter of the GPU or more
    # would sit idle with one tile a program. On the H200 (2026-12-04, gemm_stream_k_records/s20_call7_rule.json,
    # every such shape of shapes.yaml up to M = 256 at 132 SMs, 89 of them): with K >= 7168 it was faster on 27 of
    # 29 (1.07-1.70x; 0.95 / 0.97 at M16-N4096-K14336 / M16-N4608-K7168); with K = 4096 on 17 of 27 (0.85-1.52x);
    # with K <= 2880 on 4 of 33 (0.54x at M16-N4096-K1024: a 6 us call has no idle time to win back). It lost
    # where the tiles leave fewer SMs idle: M64-N7168-K8192's 112 tiles 42.9 against 39.5 us.
    "stream_k_min_k": 7168,
    "stream_k_max_tile_share": 0.75,
    "min_block": {"BLOCK_M": 64, "BLOCK_N": 16},
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): each kernel may start while
    # the one before it drains, waits for it (gdc_wait) before its first load and lets the next one start at once
    # (gdc_launch_dependents). On an H100 it took 0.99-1.07 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"TMA": [0, 1], "PERSISTENT": [0, 1], "WARP_SPECIALIZE": [0, 1], "FLATTEN": [0, 1],
                "SPLIT_K": [1, 2, 4, 8], "STREAM_K": [0, 1], "PDL": [0, 1]}


@triton.jit
def _tile_coords(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
                 SPLIT_K: tl.constexpr):
    # Grouped order: GROUP_M tile rows sweep all tile columns together, so a column of b tiles is
    # fetched from DRAM once per group instead of once per tile row. The K-slice is the fastest index.
    split = tile % SPLIT_K
    t = tile // SPLIT_K
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    first_m = (t // per_group) * GROUP_M
    group_rows = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (t % per_group) % group_rows
    pid_n = (t % per_group) // group_rows
    return pid_m, pid_n, split


@triton.jit
def _tile_k_range(a_ptr, b_ptr, a_desc, b_desc, pid_m, pid_n, k_first, k_last, M, N, K,
                  stride_am, stride_ak, stride_bn, stride_bk, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr, TMA: tl.constexpr):
    # The fp32 sum over K tiles [k_first, k_last) of one output tile's products.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA:
        m0 = pid_m * BLOCK_M
        n0 = pid_n * BLOCK_N
        for kt in range(k_first, k_last):
            a = a_desc.load([m0, kt * BLOCK_K])
            b = b_desc.load([n0, kt * BLOCK_K])
            acc = tl.dot(a, b.T, acc, input_precision=DOT_PRECISION)
    else:
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = k_first * BLOCK_K + tl.arange(0, BLOCK_K)
        # Clamped rows/columns load valid memory without a mask; their outputs are masked at the store.
        rows = (offs_m % M).to(tl.int64)
        cols = (offs_n % N).to(tl.int64)
        a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + cols[None, :] * stride_bn + offs_k[:, None] * stride_bk
        for kt in range(k_first, k_last):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                k_left = K - kt * BLOCK_K
                a = tl.load(a_ptrs, mask=tl.arange(0, BLOCK_K)[None, :] < k_left, other=0.0)
                b = tl.load(b_ptrs, mask=tl.arange(0, BLOCK_K)[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def _gemm_tile(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, tile, M, N, K,
               stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr, SPLIT_K: tl.constexpr, TMA: tl.constexpr):
    pid_m, pid_n, split = _tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M, SPLIT_K)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_per = tl.cdiv(k_tiles, SPLIT_K)
    k_first = split * k_per
    k_last = tl.minimum(k_first + k_per, k_tiles)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = _tile_k_range(a_ptr, b_ptr, a_desc, b_desc, pid_m, pid_n, k_first, k_last, M, N, K,
                        stride_am, stride_ak, stride_bn, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K,
                        DOT_PRECISION, TMA)
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K > 1:
        # fp32 partial sums [SPLIT_K, M, N]; _gemm_splitk_reduce_kernel adds them and rounds once.
        ws = ws_ptr + split.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        tl.store(ws, acc, mask=c_mask)
    elif TMA:
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))
    else:
        c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, M, N, K,
                 stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr,
                 SPLIT_K: tl.constexpr, TMA: tl.constexpr, PERSISTENT: tl.constexpr,
                 WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    if PERSISTENT:
        tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) * SPLIT_K
        for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=FLATTEN,
                             warp_specialize=WARP_SPECIALIZE):
            _gemm_tile(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, tile, M, N, K,
                       stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                       BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, DOT_PRECISION, SPLIT_K, TMA)
    else:
        _gemm_tile(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, tl.program_id(0), M, N, K,
                   stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                   BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, DOT_PRECISION, SPLIT_K, TMA)


@triton.jit
def _first_owner(it, I, R):
    # Of R programs, the r whose iterations [r * I // R, (r + 1) * I // R) hold iteration `it`.
    return ((it + 1) * R + I - 1) // I - 1


@triton.jit
def _store_part(base, acc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # A tile's fp32 part into the workspace tile at `base`, by plain stores: the flag's release after a CTA
    # barrier orders them (a TMA store is asynchronous, and nothing here would wait for it to reach memory). In
    # two column halves: converting the whole accumulator to a store layout with both copies live spilled at
    # 128 x 128 with 4 warps.
    halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
    left, right = tl.split(halves)
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N // 2)[None, :]
    tl.store(base + offs, left)
    tl.store(base + offs + BLOCK_N // 2, right)


@triton.jit
def _gemm_stream_k_kernel(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, flag_ptr, M, N, K,
                          stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn, max_spins,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr, TMA: tl.constexpr,
                          FIX_ROWS: tl.constexpr, USE_PDL: tl.constexpr = False):
    # Programs come in groups of G = the tile rows of c (program p works on tile row p % G), so at any moment
    # a column of b tiles is read by the G programs of a group at about the same K: b comes from DRAM once
    # (with one range over every tile, two programs reached the two 128-row tiles of a column at different K
    # and M256-N7168-K8192 read b twice: 60.7 us against 52.1). Within a tile row the iterations are
    # (tile column, K tile) pairs, column-major; the row's r-th program owns [r * I // R, (r + 1) * I // R) of
    # its row's I and walks it from the top down, a tile's part at a time. A part that ends before the tile's
    # last K tile is the program's first (its top tile): its fp32 sum goes to ws[p] and flag[p] says it is
    # there. The part holding the last K tile is visited last by its program (a later one of the row than
    # every other holder of the tile, each of which published its part first); it adds the published parts
    # and stores the tile.
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    G = tl.cdiv(M, BLOCK_M)
    R = tl.num_programs(0) // G
    pid_m = pid % G
    r = (pid // G).to(tl.int64)
    k_tiles = tl.cdiv(K, BLOCK_K).to(tl.int64)
    I = tl.cdiv(N, BLOCK_N).to(tl.int64) * k_tiles
    lo = r * I // R
    end = (r + 1) * I // R
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    while end > lo:
        tile = (end - 1) // k_tiles
        # tile and K-tile indices fit 32 bits (TMA offsets must); only products with R need 64
        k_last = (end - tile * k_tiles).to(tl.int32)
        k_first = tl.maximum(lo - tile * k_tiles, 0).to(tl.int32)
        pid_n = tile.to(tl.int32)
        acc = _tile_k_range(a_ptr, b_ptr, a_desc, b_desc, pid_m, pid_n, k_first, k_last, M, N, K,
                            stride_am, stride_ak, stride_bn, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K,
                            DOT_PRECISION, TMA)
        if k_last < k_tiles:
            _store_part(ws_ptr + pid.to(tl.int64) * BLOCK_M * BLOCK_N, acc, BLOCK_M, BLOCK_N)
            tl.debug_barrier()      # every thread's part of the tile stored before the flag is released
            tl.atomic_xchg(flag_ptr + pid, 1, sem="release")
        else:
            offs_n = pid_n * BLOCK_N + rn
            n_mask = offs_n[None, :] < N
            if k_first > 0:
                # The tile's other parts are in ws[q], q the programs of this tile row before this one that
                # hold some of it. This part goes to ws[P + p] (ws[p] may hold the part this program published)
                # and the sum is taken a slab of FIX_ROWS rows at a time: a whole tile held twice in registers
                # (the sum and a part) spilled at 128 x 128 with 4 warps.
                own = ws_ptr + (tl.num_programs(0) + pid).to(tl.int64) * BLOCK_M * BLOCK_N
                _store_part(own, acc, BLOCK_M, BLOCK_N)
                first_q = _first_owner(tile * k_tiles, I, R)
                arrived = 1
                for rq in range(first_q, r):
                    q = rq * G + pid_m
                    spins = 0
                    ready = tl.atomic_add(flag_ptr + q, 0, sem="acquire")
                    while ready == 0:
                        ready = tl.atomic_add(flag_ptr + q, 0, sem="acquire")
                        spins += 1
                        ready = tl.where(spins >= max_spins, -1, ready)
                    arrived = arrived & (ready > 0)
                tl.debug_barrier()      # this program's own part stored by every thread before it is read
                for row0 in tl.static_range(0, BLOCK_M, FIX_ROWS):
                    slab = (row0 + tl.arange(0, FIX_ROWS))[:, None] * BLOCK_N + rn[None, :]
                    total = tl.load(own + slab, cache_modifier=".cg")
                    for rq in range(first_q, r):
                        q = rq * G + pid_m
                        total += tl.load(ws_ptr + q * (BLOCK_M * BLOCK_N) + slab, cache_modifier=".cg")
                    # a part that never arrived (the bounded wait gave up) poisons the tile: NaN, never a
                    # plausible wrong value
                    total = tl.where(arrived > 0, total, float("nan"))
                    slab_m = pid_m * BLOCK_M + row0 + tl.arange(0, FIX_ROWS)
                    slab_c = c_ptr + slab_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
                    tl.store(slab_c, total.to(c_ptr.dtype.element_ty), mask=(slab_m[:, None] < M) & n_mask)
            elif TMA:       # a whole tile of int64 pointers beside the accumulator spilled at 128 x 128, 4 warps
                c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))
            else:
                offs_m = pid_m * BLOCK_M + rm
                c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
                tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & n_mask)
        end = tile * k_tiles + k_first


@triton.jit
def _gemm_splitk_reduce_kernel(ws_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr,
                               USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _bucket(M: int) -> dict:
    """The first bucket whose bound is >= M (the last one past every bound)."""
    for bound, bucket in CONFIGS["buckets"]:
        if M <= bound:
            return bucket
    return CONFIGS["buckets"][-1][1]


def _pick_config(M: int, N: int) -> dict:
    cfg = dict(_bucket(M))
    floor_m, floor_n = CONFIGS["min_block"]["BLOCK_M"], CONFIGS["min_block"]["BLOCK_N"]
    # Narrow N down to 64 first (keeps wgmma-sized tiles), then M, then N down to the floor.
    while (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]) * cfg["SPLIT_K"]
           < CONFIGS["min_programs"]):
        if cfg["BLOCK_N"] > 64:
            cfg["BLOCK_N"] //= 2
        elif cfg["BLOCK_M"] > floor_m:
            cfg["BLOCK_M"] //= 2
        elif cfg["BLOCK_N"] > floor_n:
            cfg["BLOCK_N"] //= 2
        else:
            break
    return cfg


def _stream_k_config(M: int, N: int, K: int, sm_count: int) -> dict | None:
    """The stream-K tile config for this call, or None: the bucket of M must be STREAM_K=1, K at least
    stream_k_min_k, and the stream-K tiles few enough that one tile a program would leave a quarter of the SMs
    or more idle (stream_k_max_tile_share)."""
    if M <= 0 or N <= 0 or K < max(1, CONFIGS["stream_k_min_k"]):
        return None
    bucket = _bucket(M)
    if not bucket.get("STREAM_K"):
        return None
    cfg = {**bucket, **bucket.get("stream_k_tile", {})}
    tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    return cfg if tiles <= CONFIGS["stream_k_max_tile_share"] * sm_count else None


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _tma_ready(t) -> bool:
    """TMA's rule: 16-byte aligned base and row stride, unit inner stride."""
    size = t.element_size()
    return t.stride(1) == 1 and (t.stride(0) * size) % 16 == 0 and (t.storage_offset() * size) % 16 == 0


def _sm_count(t) -> int:
    if not t.is_cuda:
        return 132          # the interpreter: an H200's count, so the persistent loop runs as it would there
    return torch.cuda.get_device_properties(t.device).multi_processor_count


def _gemm_stream_k(a, b, c, cfg) -> None:
    """c = a @ b.T by stream-K (see _gemm_stream_k_kernel): up to one program an SM, a group of them a tile row
    of c, each an equal share of its row's (tile column, K tile) iterations, so the SMs stay busy however few
    tiles there are (M64-N1280 has 20 tiles of 64 x 64 for 132 SMs). Two fp32 tiles of workspace and one
    flag a program; the flags are zeroed by each call, so a call never reads a flag left by another. A row of
    tiles gets one program when the rows alone fill the GPU: then no part waits for another, which is what
    lets a launch of more programs than SMs end."""
    M, K = a.shape
    N = b.shape[0]
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    rows = triton.cdiv(M, bm)
    row_iters = triton.cdiv(N, bn) * triton.cdiv(K, bk)
    per_row = max(1, min(triton.cdiv(row_iters, CONFIGS["stream_k_min_iters"]), _sm_count(a) // rows))
    programs = rows * per_row
    tma = bool(cfg["TMA"]) and _tma_ready(a) and _tma_ready(b) and _tma_ready(c)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk]) if tma else None
    b_desc = TensorDescriptor.from_tensor(b, [bn, bk]) if tma else None
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn]) if tma else None
    ws = torch.empty((2 * programs, bm, bn), device=a.device, dtype=torch.float32)     # published parts, fix-up sums
    flags = torch.zeros((programs,), device=a.device, dtype=torch.int32)
    pdl = _pdl(a)
    _gemm_stream_k_kernel[(programs,)](
        a, b, c, a_desc, b_desc, c_desc, ws, flags, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        CONFIGS["stream_k_max_spins"], BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        EVEN_K=K % bk == 0, DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
        TMA=1 if tma else 0, FIX_ROWS=min(bm, 32), USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"])


def gemm(a, b):
    M, K = a.shape
    N, K_b = b.shape
    if K_b != K:
        raise ValueError(f"gemm: a is [M={M}, K={K}] but b is [N={N}, K={K_b}]; b must be [N, K] (nn.Linear layout)")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    sk = _stream_k_config(M, N, K, _sm_count(a))
    if sk is not None:
        _gemm_stream_k(a, b, c, sk)
        return c
    cfg = _pick_config(M, N)
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    split = max(1, min(cfg["SPLIT_K"], triton.cdiv(K, bk)))
    tma = bool(cfg["TMA"]) and _tma_ready(a) and _tma_ready(b) and _tma_ready(c)
    a_desc = b_desc = c_desc = ws = None
    if tma:
        a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
        b_desc = TensorDescriptor.from_tensor(b, [bn, bk])
        c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    if split > 1:
        ws = torch.empty((split, M, N), device=a.device, dtype=torch.float32)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn) * split
    grid = (min(tiles, _sm_count(a)) if cfg["PERSISTENT"] else tiles,)
    pdl = _pdl(a)
    _gemm_kernel[grid](
        a, b, c, a_desc, b_desc, c_desc, ws, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"],
        EVEN_K=K % (bk * split) == 0,
        # fp32 operands get true fp32 products; TF32 would fail the fp32 tolerance.
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
        SPLIT_K=split, TMA=1 if tma else 0, PERSISTENT=int(bool(cfg["PERSISTENT"])),
        WARP_SPECIALIZE=int(bool(cfg["WARP_SPECIALIZE"]) and bool(cfg["PERSISTENT"])),
        FLATTEN=int(bool(cfg["FLATTEN"]) and bool(cfg["PERSISTENT"])),
        USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    if split > 1:
        block = 1024
        _gemm_splitk_reduce_kernel[(triton.cdiv(M * N, block),)](ws, c, M * N, SPLIT_K=split, BLOCK=block,
                                                                 USE_PDL=pdl, launch_pdl=pdl, num_warps=4)
    return c
