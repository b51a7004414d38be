"""Seed kernel for fused_moe: routing alignment, two grouped GEMMs and a fixed-order reduction, all in Triton.

out[t] = sum_j topk_weights[t, j] * (silu(x_t g_e^T) * (x_t u_e^T)) w2[e]^T, e = topk_ids[t, j],
g_e = w1[e, :I], u_e = w1[e, I:]. A (token, slot) pair p = t * k + j is one row of work.

1. Alignment (no host sync): count the pairs of each expert, round each count up to BLOCK_M, take the
   exclusive prefix sum, and write `sorted_ids` (pair indices grouped by expert, in token order, each
   expert's run padded with the sentinel num_pairs to a multiple of BLOCK_M) and `block_expert` (the
   expert of every BLOCK_M-row block). Up to CONFIGS["align_single_program_max_pairs"] pairs one
   program does it all in one launch (decode); above, chunk histograms, one offsets program and chunk
   scatters (three launches). Within a chunk, pairs are ranked by sorting (expert, lane) keys.
   ALIGN_RANK=1 (CONFIGS["align_rank"]) ranks them by an atomic counter per (chunk, expert) instead, seeded
   with the chunk's first slots: no sort, and above one program two launches, not three (each chunk
   program sums the small chunks x experts count table itself, so no offsets launch). Pairs of an expert
   then land in any order within its run, which changes no output bit: every row of a grouped GEMM tile
   is computed on its own, GEMM 2 stores by pair index and the reduction adds the k slots in a fixed order.
2. GEMM 1 per block: gather the hidden rows of its pairs, gate and up tiles with tl.dot (fp32
   accumulators), silu(gate) * up, stored at the block's sorted rows of `inter` [max_padded, I].
3. GEMM 2 per block: inter rows x w2[e]^T, times the pair's routing weight, stored at the pair's row
   of `partial` [T * k, H].
4. out[t] = sum over j in order 0..k-1 of partial[t * k + j] (fp32, deterministic).
Launch grids use the upper bound of padded blocks, (T*k + min(E, T*k) * (BLOCK_M - 1)) / BLOCK_M;
programs past the real count (read on the device) exit at once, so the call can be CUDA-graph captured.
"""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# Tile shapes by rows per expert, m = T * k / E (how full a BLOCK_M tile of one expert gets; T alone
# cannot tell DeepSeek's 256 experts from Mixtral's 8): the first bucket whose bound is >= m is used.
# Tuned on the H200 from the exhaustive 288-config table of benchmarks/results/moe_search.md: per
# bucket, the config with the best weighted attainment on the hot shapes whose m falls in it (the
# last bucket, which no hot shape reaches, keeps the earlier hand-picked wgmma-sized tiles).
# Small m (decode) is memory-bound: thin BLOCK_M, wide loads with 2-3 stages in flight.
# That table gave both GEMMs one tile. Searched one GEMM at a time over the six decode shapes (config_sweep.py's
# fused_moe_gemm1 / fused_moe_gemm2 spaces; H100, 2026-12-06, benchmarks/results/moe_decode_tiles.md), GEMM 2's
# tile moved no shape by more than noise among the best, and GEMM 1's changed one bucket by more than noise: at
# T256-E128 (16 rows per expert) a 64-wide tile took 253 us against the joint 256-wide one's 272. 64 columns divide
# I = 192, where a 256-wide tile stages and multiplies 64 wrapped columns, and give 3 programs per expert block.
CONFIGS = {
    "buckets": [
        (2, dict(BLOCK_M=16, GROUP_M=1, W_TMA=0,
                 gemm1=dict(BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=2),
                 gemm2=dict(BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=2))),
        (6, dict(BLOCK_M=16, GROUP_M=16, W_TMA=0,
                 gemm1=dict(BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=3),
                 gemm2=dict(BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=3))),
        (12, dict(BLOCK_M=32, GROUP_M=1, W_TMA=0,
                  gemm1=dict(BLOCK_N=256, BLOCK_K=128, num_warps=8, num_stages=2),
                  gemm2=dict(BLOCK_N=256, BLOCK_K=128, num_warps=8, num_stages=2))),
        (24, dict(BLOCK_M=32, GROUP_M=1, W_TMA=0,
                  gemm1=dict(BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4),
                  gemm2=dict(BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4))),
        (48, dict(BLOCK_M=64, GROUP_M=16, W_TMA=0,
                  gemm1=dict(BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4),
                  gemm2=dict(BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4))),
        (160, dict(BLOCK_M=128, GROUP_M=1, W_TMA=0,
                   gemm1=dict(BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3),
                   gemm2=dict(BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3))),
        (1 << 62, dict(BLOCK_M=128, GROUP_M=8, W_TMA=0,
                       gemm1=dict(BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3),
                       gemm2=dict(BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4))),
    ],
    # GEMM 1 halves BLOCK_N (not below 16) while it would launch fewer programs than this. 0: off, as
    # the tuned table was measured (its decode configs already launch enough programs).
    "gemm1_min_programs": 0,
    "align_single_program_max_pairs": 1024,
    "align_chunk": 1024,             # pairs per chunk program (power of two), grown when chunks would not fit
    "align_max_tile": 16384,         # chunks (rounded to 2^n) x expert bins the offsets program holds at once
    "align_warps": 4,
    "align_offsets_warps": 16,       # the offsets program holds up to align_max_tile counts in registers
    # ALIGN_RANK (see the docstring): 0 sorts (expert, lane) keys, the seed as timed on the H200; 1 takes atomic
    # ranks, the technique that made moe_align_block_size 3.7-5.0x faster at 2048+ pairs there (2026-12-03).
    # Inside fused_moe it moved no hot shape beyond noise on an H100 (0.98-1.00, session22_h100.md; with 2048 pairs in
    # one program, `align_atomic_2048`, 1.000-1.010 in 5 rounds, moe_decode_tiles.md): left off.
    "align_rank": 0,
    "align_rank_chunk": 256,         # ALIGN_RANK=1: pairs per chunk program above one program (power of two)
    "align_table_tile": 8192,        # ALIGN_RANK=1: count-table entries (chunks x bins) summed per loop step
    # ALIGN_RANK=1's place programs: chunk 0 writes the layout, which spilled at 4 warps with BLOCK_M = 128 and
    # 256 experts (255 registers and a 312-byte stack in the Hopper build; 51 registers at 16, as the offsets
    # program runs it)
    "align_place_warps": 16,
    "reduce": dict(BLOCK_H=1024, num_warps=4),
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): each of the call's three to
    # six kernels may start while the one before it drains, waits for it (gdc_wait) before its first load and lets
    # the next one start at once (gdc_launch_dependents). On an H100 (2026-12-06, 5 interleaved rounds,
    # benchmarks/results/moe_decode_tiles.md) 0.985-0.989 of the time without it in every round of the three E = 128
    # decode shapes, 0.995-1.000 elsewhere (one timing each); never slower. The variant `pdl_off` restores 0.
    "PDL": 1,
}
# W_TMA=1: both grouped GEMMs load expert weight tiles through TMA descriptors (the gathered hidden rows
# and the inter rows stay pointer loads); 0: pointer loads, the earlier seed. On the H200 (h200.md, 2026-12-04, one
# timing a shape) the variant `w_tma` read 0.97-1.07 of the seed's time, and with GROUP_M 8 at prefill 0.98: left off.
SEARCH_SPACE = {"W_TMA": [0, 1], "align_rank": [0, 1], "PDL": [0, 1]}


@triton.jit
def _fused_moe_load_ids(topk_ids_ptr, stride_t, stride_j, first_pair, num_pairs,
                        TOPK: tl.constexpr, CHUNK: tl.constexpr):
    pair = first_pair + tl.arange(0, CHUNK)
    valid = pair < num_pairs
    ids = tl.load(topk_ids_ptr + (pair // TOPK) * stride_t + (pair % TOPK) * stride_j, mask=valid, other=0)
    return valid, ids


@triton.jit
def _fused_moe_count(ids, valid, NUM_BINS: tl.constexpr):
    # Lanes past the last pair were loaded as expert 0: take them back out of bin 0.
    counts = tl.histogram(ids, NUM_BINS)
    n_invalid = tl.sum((valid == 0).to(tl.int32), 0)
    return counts - tl.where(tl.arange(0, NUM_BINS) == 0, n_invalid, 0)


@triton.jit
def _fused_moe_scatter(sorted_ids_ptr, first_pair, ids, valid, counts, base, E,
                       CHUNK: tl.constexpr):
    """Write the chunk's pair indices at base[e] + (rank among the chunk's pairs of expert e)."""
    lane = tl.arange(0, CHUNK)
    # Sorting (expert, lane) keys puts each expert's pairs together in token order, padding lanes last.
    key = tl.sort(tl.where(valid, ids, E) * CHUNK + lane)
    expert = key // CHUNK
    ok = expert < E
    expert = tl.where(ok, expert, 0)
    first_lane = tl.cumsum(counts, 0) - counts
    dest = tl.gather(base, expert, 0) + lane - tl.gather(first_lane, expert, 0)
    tl.store(sorted_ids_ptr + dest, first_pair + key % CHUNK, mask=ok)


@triton.jit
def _fused_moe_place(sorted_ids_ptr, cursor_ptr, first_pair, ids, valid, base,
                     CHUNK: tl.constexpr, NUM_BINS: tl.constexpr):
    """ALIGN_RANK=1: each pair's slot from its expert's counter in this program's row of `cursor_ptr`, seeded
    with base[e] (the chunk's first slot for expert e); the barrier orders the seeds before the adds."""
    tl.store(cursor_ptr + tl.arange(0, NUM_BINS), base)
    tl.debug_barrier()
    dest = tl.atomic_add(cursor_ptr + ids, 1, mask=valid)
    tl.store(sorted_ids_ptr + dest, first_pair + tl.arange(0, CHUNK), mask=valid)


@triton.jit
def _fused_moe_write_layout(sorted_ids_ptr, block_expert_ptr, num_padded_ptr, counts, padded, start,
                            num_pairs, BLOCK_M: tl.constexpr, PAD_TILE: tl.constexpr, MAP_TILE: tl.constexpr):
    total = tl.sum(padded, 0)
    tl.store(num_padded_ptr, total)
    # Each expert's padding slots [start + count, start + padded) get the sentinel num_pairs.
    for p0 in tl.static_range(0, BLOCK_M, PAD_TILE):
        slot = counts[:, None] + p0 + tl.arange(0, PAD_TILE)[None, :]
        tl.store(sorted_ids_ptr + start[:, None] + slot, num_pairs, mask=slot < padded[:, None])
    # Block b belongs to the first expert whose block range ends after b, i.e. its index is the number of
    # experts that end at or before b (empty experts end where they start and are skipped).
    end_block = (start + padded) // BLOCK_M
    n_blocks = total // BLOCK_M
    for b0 in range(0, n_blocks, MAP_TILE):
        block = b0 + tl.arange(0, MAP_TILE)
        owner = tl.sum((end_block[None, :] <= block[:, None]).to(tl.int32), 1)
        tl.store(block_expert_ptr + block, owner, mask=block < n_blocks)


@triton.jit
def _fused_moe_align_small_kernel(topk_ids_ptr, stride_t, stride_j, sorted_ids_ptr, block_expert_ptr,
                                  num_padded_ptr, cursor_ptr, num_pairs, E,
                                  TOPK: tl.constexpr, CHUNK: tl.constexpr, NUM_BINS: tl.constexpr,
                                  BLOCK_M: tl.constexpr, PAD_TILE: tl.constexpr, MAP_TILE: tl.constexpr,
                                  ALIGN_RANK: tl.constexpr, USE_PDL: tl.constexpr = False):
    """All pairs in one program: counts, padded offsets, scatter and layout in a single launch."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    valid, ids = _fused_moe_load_ids(topk_ids_ptr, stride_t, stride_j, 0, num_pairs, TOPK, CHUNK)
    counts = _fused_moe_count(ids, valid, NUM_BINS)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    start = tl.cumsum(padded, 0) - padded
    if ALIGN_RANK:
        _fused_moe_place(sorted_ids_ptr, cursor_ptr, 0, ids, valid, start, CHUNK, NUM_BINS)
    else:
        _fused_moe_scatter(sorted_ids_ptr, 0, ids, valid, counts, start, E, CHUNK)
    _fused_moe_write_layout(sorted_ids_ptr, block_expert_ptr, num_padded_ptr, counts, padded, start,
                            num_pairs, BLOCK_M, PAD_TILE, MAP_TILE)


@triton.jit
def _fused_moe_count_kernel(topk_ids_ptr, stride_t, stride_j, chunk_counts_ptr, num_pairs,
                            TOPK: tl.constexpr, CHUNK: tl.constexpr, NUM_BINS: tl.constexpr,
                            USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    c = tl.program_id(0)
    valid, ids = _fused_moe_load_ids(topk_ids_ptr, stride_t, stride_j, c * CHUNK, num_pairs, TOPK, CHUNK)
    counts = _fused_moe_count(ids, valid, NUM_BINS)
    tl.store(chunk_counts_ptr + c * NUM_BINS + tl.arange(0, NUM_BINS), counts)


@triton.jit
def _fused_moe_offsets_kernel(chunk_counts_ptr, chunk_base_ptr, sorted_ids_ptr, block_expert_ptr,
                              num_padded_ptr, num_chunks, num_pairs,
                              CHUNKS_P2: tl.constexpr, NUM_BINS: tl.constexpr, BLOCK_M: tl.constexpr,
                              PAD_TILE: tl.constexpr, MAP_TILE: tl.constexpr, USE_PDL: tl.constexpr = False):
    """One program: per-expert totals, padded expert starts and every chunk's first slot per expert."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    chunk = tl.arange(0, CHUNKS_P2)[:, None]
    offs = chunk * NUM_BINS + tl.arange(0, NUM_BINS)[None, :]
    per_chunk = tl.load(chunk_counts_ptr + offs, mask=chunk < num_chunks, other=0)
    counts = tl.sum(per_chunk, 0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    start = tl.cumsum(padded, 0) - padded
    base = start[None, :] + tl.cumsum(per_chunk, 0) - per_chunk
    tl.store(chunk_base_ptr + offs, base, mask=chunk < num_chunks)
    _fused_moe_write_layout(sorted_ids_ptr, block_expert_ptr, num_padded_ptr, counts, padded, start,
                            num_pairs, BLOCK_M, PAD_TILE, MAP_TILE)


@triton.jit
def _fused_moe_scatter_kernel(topk_ids_ptr, stride_t, stride_j, chunk_counts_ptr, chunk_base_ptr,
                              sorted_ids_ptr, num_pairs, E,
                              TOPK: tl.constexpr, CHUNK: tl.constexpr, NUM_BINS: tl.constexpr,
                            USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    c = tl.program_id(0)
    valid, ids = _fused_moe_load_ids(topk_ids_ptr, stride_t, stride_j, c * CHUNK, num_pairs, TOPK, CHUNK)
    bins = c * NUM_BINS + tl.arange(0, NUM_BINS)
    counts = tl.load(chunk_counts_ptr + bins)
    base = tl.load(chunk_base_ptr + bins)
    _fused_moe_scatter(sorted_ids_ptr, c * CHUNK, ids, valid, counts, base, E, CHUNK)


@triton.jit
def _fused_moe_place_kernel(topk_ids_ptr, stride_t, stride_j, chunk_counts_ptr, cursor_ptr, sorted_ids_ptr,
                            block_expert_ptr, num_padded_ptr, num_chunks, num_pairs,
                            TOPK: tl.constexpr, CHUNK: tl.constexpr, NUM_BINS: tl.constexpr,
                            TABLE_ROWS: tl.constexpr, BLOCK_M: tl.constexpr, PAD_TILE: tl.constexpr,
                            MAP_TILE: tl.constexpr, USE_PDL: tl.constexpr = False):
    """ALIGN_RANK=1 above one program, after _fused_moe_count_kernel: chunk c sums the whole count table (every
    expert's total, and its count in the chunks before c) and places its pairs by atomic ranks; chunk 0 also
    writes the padding, the block -> expert map and the padded total."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    c = tl.program_id(0)
    bins = tl.arange(0, NUM_BINS)
    totals = tl.zeros([NUM_BINS], dtype=tl.int32)
    before = tl.zeros([NUM_BINS], dtype=tl.int32)
    for r0 in range(0, num_chunks, TABLE_ROWS):
        chunk = r0 + tl.arange(0, TABLE_ROWS)[:, None]
        table = tl.load(chunk_counts_ptr + chunk * NUM_BINS + bins[None, :], mask=chunk < num_chunks, other=0)
        totals += tl.sum(table, 0)
        before += tl.sum(tl.where(chunk < c, table, 0), 0)
    padded = (totals + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    start = tl.cumsum(padded, 0) - padded
    valid, ids = _fused_moe_load_ids(topk_ids_ptr, stride_t, stride_j, c * CHUNK, num_pairs, TOPK, CHUNK)
    _fused_moe_place(sorted_ids_ptr, cursor_ptr + c * NUM_BINS, c * CHUNK, ids, valid, start + before, CHUNK,
                     NUM_BINS)
    if c == 0:
        _fused_moe_write_layout(sorted_ids_ptr, block_expert_ptr, num_padded_ptr, totals, padded, start,
                                num_pairs, BLOCK_M, PAD_TILE, MAP_TILE)


@triton.jit
def _fused_moe_block_coords(max_blocks, n_tiles, GROUP_M: tl.constexpr):
    # Grouped order: GROUP_M blocks sweep all N tiles together, so an expert's weight tile is reused
    # from L2 by its consecutive blocks.
    pid = tl.program_id(0)
    per_group = GROUP_M * n_tiles
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(max_blocks - first_m, GROUP_M)
    return first_m + (pid % per_group) % group_rows, (pid % per_group) // group_rows


@triton.jit
def _fused_moe_gemm1_kernel(hidden_ptr, w1_ptr, w1_desc, inter_ptr, sorted_ids_ptr, block_expert_ptr,
                            num_padded_ptr, num_pairs, max_blocks, H, I,
                            stride_ht, stride_hh, stride_we, stride_wn, stride_wk, stride_im, stride_ii,
                            TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
                            DOT_PRECISION: tl.constexpr, W_TMA: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid_m, pid_n = _fused_moe_block_coords(max_blocks, tl.cdiv(I, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_ids_ptr + rows)
    # Padding rows read token 0: rows of a product are independent and theirs are never stored by GEMM 2.
    token = tl.where(pair < num_pairs, pair // TOPK, 0).to(tl.int64)
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = offs_n % I
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = hidden_ptr + token[:, None] * stride_ht + offs_k[None, :] * stride_hh
    g_ptrs = w1_ptr + expert * stride_we + cols[None, :] * stride_wn + offs_k[:, None] * stride_wk
    u_ptrs = g_ptrs + I * stride_wn
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # W_TMA: weight tiles through a descriptor over w1 as [E * 2I, H] (rows past I of a ragged last
    # tile belong to the neighbouring half or expert: finite, computed, never stored; past H: zeros).
    g_row = (expert * 2 * I + pid_n * BLOCK_N).to(tl.int32)
    for k in range(0, tl.cdiv(H, BLOCK_K)):
        if EVEN_K:
            x = tl.load(x_ptrs)
        else:
            x = tl.load(x_ptrs, mask=offs_k[None, :] < H - k * BLOCK_K, other=0.0)
        if W_TMA:
            g = w1_desc.load([g_row, k * BLOCK_K]).T
            u = w1_desc.load([g_row + I, k * BLOCK_K]).T
        elif EVEN_K:
            g = tl.load(g_ptrs)
            u = tl.load(u_ptrs)
        else:
            k_left = H - k * BLOCK_K
            g = tl.load(g_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            u = tl.load(u_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc_g = tl.dot(x, g, acc_g, input_precision=DOT_PRECISION)
        acc_u = tl.dot(x, u, acc_u, input_precision=DOT_PRECISION)
        x_ptrs += BLOCK_K * stride_hh
        g_ptrs += BLOCK_K * stride_wk
        u_ptrs += BLOCK_K * stride_wk
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    out_ptrs = inter_ptr + rows.to(tl.int64)[:, None] * stride_im + offs_n[None, :] * stride_ii
    tl.store(out_ptrs, act.to(inter_ptr.dtype.element_ty), mask=offs_n[None, :] < I)


@triton.jit
def _fused_moe_gemm2_kernel(inter_ptr, w2_ptr, w2_desc, partial_ptr, sorted_ids_ptr, block_expert_ptr,
                            num_padded_ptr, topk_weights_ptr, num_pairs, max_blocks, H, I,
                            stride_im, stride_ii, stride_we, stride_wn, stride_wk, stride_pp, stride_ph,
                            stride_rt, stride_rj,
                            TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
                            DOT_PRECISION: tl.constexpr, W_TMA: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid_m, pid_n = _fused_moe_block_coords(max_blocks, tl.cdiv(H, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_ids_ptr + rows)
    real = pair < num_pairs
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = offs_n % H
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = inter_ptr + rows.to(tl.int64)[:, None] * stride_im + offs_k[None, :] * stride_ii
    b_ptrs = w2_ptr + expert * stride_we + cols[None, :] * stride_wn + offs_k[:, None] * stride_wk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    b_row = (expert * H + pid_n * BLOCK_N).to(tl.int32)      # W_TMA: w2 as [E * H, I]
    for k in range(0, tl.cdiv(I, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
        else:
            a = tl.load(a_ptrs, mask=offs_k[None, :] < I - k * BLOCK_K, other=0.0)
        if W_TMA:
            b = w2_desc.load([b_row, k * BLOCK_K]).T
        elif EVEN_K:
            b = tl.load(b_ptrs)
        else:
            b = tl.load(b_ptrs, mask=offs_k[:, None] < I - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ii
        b_ptrs += BLOCK_K * stride_wk
    weight = tl.load(topk_weights_ptr + (pair // TOPK) * stride_rt + (pair % TOPK) * stride_rj, mask=real, other=0.0)
    acc = acc * weight.to(tl.float32)[:, None]
    out_ptrs = partial_ptr + pair.to(tl.int64)[:, None] * stride_pp + offs_n[None, :] * stride_ph
    tl.store(out_ptrs, acc.to(partial_ptr.dtype.element_ty), mask=real[:, None] & (offs_n[None, :] < H))


@triton.jit
def _fused_moe_reduce_kernel(partial_ptr, out_ptr, H, stride_pp, stride_ph, stride_ot, stride_oh,
                             TOPK: tl.constexpr, BLOCK_H: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    t = tl.program_id(0).to(tl.int64)
    offs_h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = offs_h < H
    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for j in tl.static_range(TOPK):      # fixed order over the k slots: deterministic
        acc += tl.load(partial_ptr + (t * TOPK + j) * stride_pp + offs_h * stride_ph, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * stride_ot + offs_h * stride_oh, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _pick_config(T: int, E: int, k: int) -> dict:
    rows_per_expert = T * k / E
    for bound, bucket in CONFIGS["buckets"]:
        if rows_per_expert <= bound:
            return bucket
    return CONFIGS["buckets"][-1][1]


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _align(topk_ids, E: int, BLOCK_M: int, max_blocks: int, pdl: bool = False):
    """Sorted pair indices, the block -> expert map and the padded row count (on the device); pdl: every launch
    with programmatic dependent launch (CONFIGS["PDL"])."""
    T, k = topk_ids.shape
    num_pairs = T * k
    device = topk_ids.device
    sorted_ids = torch.empty(max_blocks * BLOCK_M, dtype=torch.int32, device=device)
    block_expert = torch.empty(max_blocks, dtype=torch.int32, device=device)
    num_padded = torch.empty(1, dtype=torch.int32, device=device)
    num_bins = max(16, triton.next_power_of_2(E))
    layout = dict(BLOCK_M=BLOCK_M, PAD_TILE=min(16, BLOCK_M), MAP_TILE=max(16, 4096 // num_bins))
    strides = (topk_ids.stride(0), topk_ids.stride(1))
    warps = CONFIGS["align_warps"]
    rank = 1 if CONFIGS["align_rank"] else 0
    if num_pairs <= CONFIGS["align_single_program_max_pairs"]:
        # the counter row of ALIGN_RANK=1, seeded by the kernel (num_padded stands in when it is unused)
        cursor = torch.empty(num_bins, dtype=torch.int32, device=device) if rank else num_padded
        _fused_moe_align_small_kernel[(1,)](
            topk_ids, *strides, sorted_ids, block_expert, num_padded, cursor, num_pairs, E,
            TOPK=k, CHUNK=max(16, triton.next_power_of_2(num_pairs)), NUM_BINS=num_bins, **layout,
            ALIGN_RANK=rank, USE_PDL=pdl, launch_pdl=pdl, num_warps=warps)
        return sorted_ids, block_expert, num_padded
    max_chunks = max(1, CONFIGS["align_max_tile"] // num_bins)
    chunk = max(CONFIGS["align_rank_chunk"] if rank else CONFIGS["align_chunk"],
                triton.next_power_of_2(triton.cdiv(num_pairs, max_chunks)))
    num_chunks = triton.cdiv(num_pairs, chunk)
    chunk_counts = torch.empty((num_chunks, num_bins), dtype=torch.int32, device=device)
    _fused_moe_count_kernel[(num_chunks,)](
        topk_ids, *strides, chunk_counts, num_pairs, TOPK=k, CHUNK=chunk, NUM_BINS=num_bins, USE_PDL=pdl,
        launch_pdl=pdl, num_warps=warps)
    if rank:
        cursor = torch.empty((num_chunks, num_bins), dtype=torch.int32, device=device)
        _fused_moe_place_kernel[(num_chunks,)](
            topk_ids, *strides, chunk_counts, cursor, sorted_ids, block_expert, num_padded, num_chunks, num_pairs,
            TOPK=k, CHUNK=chunk, NUM_BINS=num_bins, TABLE_ROWS=max(1, CONFIGS["align_table_tile"] // num_bins),
            **layout, USE_PDL=pdl, launch_pdl=pdl, num_warps=CONFIGS["align_place_warps"])
        return sorted_ids, block_expert, num_padded
    chunk_base = torch.empty((num_chunks, num_bins), dtype=torch.int32, device=device)
    _fused_moe_offsets_kernel[(1,)](
        chunk_counts, chunk_base, sorted_ids, block_expert, num_padded, num_chunks, num_pairs,
        CHUNKS_P2=triton.next_power_of_2(num_chunks), NUM_BINS=num_bins, **layout, USE_PDL=pdl, launch_pdl=pdl,
        num_warps=CONFIGS["align_offsets_warps"])
    _fused_moe_scatter_kernel[(num_chunks,)](
        topk_ids, *strides, chunk_counts, chunk_base, sorted_ids, num_pairs, E,
        TOPK=k, CHUNK=chunk, NUM_BINS=num_bins, USE_PDL=pdl, launch_pdl=pdl, num_warps=warps)
    return sorted_ids, block_expert, num_padded


def fused_moe(hidden, w1, w2, topk_weights, topk_ids):
    T, H = hidden.shape
    E, two_I, H_w = w1.shape
    I = two_I // 2
    k = topk_ids.shape[1]
    if H_w != H or tuple(w2.shape) != (E, H, I) or two_I != 2 * I:
        raise ValueError(f"fused_moe: hidden [T={T}, H={H}], w1 {tuple(w1.shape)}, w2 {tuple(w2.shape)}: "
                         f"expected w1 [E, 2I, H] and w2 [E, H, I]")
    cfg = _pick_config(T, E, k)
    BLOCK_M, GROUP_M = cfg["BLOCK_M"], cfg["GROUP_M"]
    num_pairs = T * k
    # Upper bound of padded blocks: only experts that get a pair are padded, each by < BLOCK_M rows.
    max_blocks = triton.cdiv(num_pairs + min(E, num_pairs) * (BLOCK_M - 1), BLOCK_M)
    pdl = _pdl(hidden)
    sorted_ids, block_expert, num_padded = _align(topk_ids, E, BLOCK_M, max_blocks, pdl)
    precision = "ieee" if hidden.dtype == torch.float32 else "tf32"   # fp32 means fp32, not TF32

    g1 = dict(cfg["gemm1"])
    g2 = cfg["gemm2"]
    # TMA's rule: 16-byte aligned rows (H and I multiples of 8 in bf16); otherwise pointer loads.
    w_tma = bool(cfg["W_TMA"]) and all(
        w.is_contiguous() and (w.storage_offset() * w.element_size()) % 16 == 0 for w in (w1, w2)) and (
        H * w1.element_size()) % 16 == 0 and (I * w2.element_size()) % 16 == 0
    while max_blocks * triton.cdiv(I, g1["BLOCK_N"]) < CONFIGS["gemm1_min_programs"] and g1["BLOCK_N"] > 16:
        g1["BLOCK_N"] //= 2
    inter = torch.empty((max_blocks * BLOCK_M, I), dtype=hidden.dtype, device=hidden.device)
    w1_desc = TensorDescriptor.from_tensor(w1.view(E * two_I, H), [g1["BLOCK_N"], g1["BLOCK_K"]]) if w_tma else None
    _fused_moe_gemm1_kernel[(max_blocks * triton.cdiv(I, g1["BLOCK_N"]),)](
        hidden, w1, w1_desc, inter, sorted_ids, block_expert, num_padded, num_pairs, max_blocks, H, I,
        hidden.stride(0), hidden.stride(1), w1.stride(0), w1.stride(1), w1.stride(2),
        inter.stride(0), inter.stride(1),
        TOPK=k, BLOCK_M=BLOCK_M, BLOCK_N=g1["BLOCK_N"], BLOCK_K=g1["BLOCK_K"], GROUP_M=GROUP_M,
        EVEN_K=H % g1["BLOCK_K"] == 0, DOT_PRECISION=precision, W_TMA=1 if w_tma else 0,
        USE_PDL=pdl, launch_pdl=pdl, num_warps=g1["num_warps"], num_stages=g1["num_stages"])

    out = torch.empty((T, H), dtype=hidden.dtype, device=hidden.device)
    # With one slot per token the pair rows are the token rows: GEMM 2 writes the output directly.
    partial = out if k == 1 else torch.empty((num_pairs, H), dtype=hidden.dtype, device=hidden.device)
    w2_desc = TensorDescriptor.from_tensor(w2.view(E * H, I), [g2["BLOCK_N"], g2["BLOCK_K"]]) if w_tma else None
    _fused_moe_gemm2_kernel[(max_blocks * triton.cdiv(H, g2["BLOCK_N"]),)](
        inter, w2, w2_desc, partial, sorted_ids, block_expert, num_padded, topk_weights, num_pairs, max_blocks, H, I,
        inter.stride(0), inter.stride(1), w2.stride(0), w2.stride(1), w2.stride(2),
        partial.stride(0), partial.stride(1), topk_weights.stride(0), topk_weights.stride(1),
        TOPK=k, BLOCK_M=BLOCK_M, BLOCK_N=g2["BLOCK_N"], BLOCK_K=g2["BLOCK_K"], GROUP_M=GROUP_M,
        EVEN_K=I % g2["BLOCK_K"] == 0, DOT_PRECISION=precision, W_TMA=1 if w_tma else 0,
        USE_PDL=pdl, launch_pdl=pdl, num_warps=g2["num_warps"], num_stages=g2["num_stages"])
    if k > 1:
        red = CONFIGS["reduce"]
        _fused_moe_reduce_kernel[(T, triton.cdiv(H, red["BLOCK_H"]))](
            partial, out, H, partial.stride(0), partial.stride(1), out.stride(0), out.stride(1),
            TOPK=k, BLOCK_H=red["BLOCK_H"], USE_PDL=pdl, launch_pdl=pdl, num_warps=red["num_warps"])
    return out
