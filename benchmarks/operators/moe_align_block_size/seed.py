"""Seed moe_align_block_size: pairs p = t * k + j grouped by expert, each group padded with the sentinel
T*k to a multiple of `block`, one expert per block, the padded total in n_post_pad.

Pairs are cut into chunks of CHUNK. Up to one chunk (decode), one program does everything: one launch.
Above, a count kernel writes each chunk's expert histogram and a second launch does the rest: program c
sums the whole (chunks x experts) histogram table itself (a few KB, from L2) to get every expert's padded
start and the slots of the chunks before it, so no third launch computes offsets. Inside a chunk a pair's
rank among its expert's pairs comes from one of three (RANK):
  0  sorting (expert, lane) keys: pair order, deterministic, O(CHUNK log^2 CHUNK) a program;
  1  an atomic counter per (chunk, expert), seeded with the chunk's bases: free order (the layout allows
     it), no sort;
  2  matching: each lane counts the earlier lanes of its chunk with its expert, MATCH_TILE lanes a step
     (CHUNK^2 compares, no sort, no atomics): pair order, deterministic, for small chunks.
Each program also writes the padding sentinels and the expert_ids of a slice of the experts (all of them,
read straight from the histogram's registers, when one program's slice is every bin), and program 0
n_post_pad; a lone program (one chunk, `fill`) instead fills [0, n_post_pad) with the sentinel before it
places the pairs. No host synchronization; entries past n_post_pad are left unwritten (consumers never read
them).
"""
import torch
import triton
import triton.language as tl

# By pairs P = T * k: the first bucket whose bound is >= P. A CHUNK >= P means one program, one launch.
# A program's time here is its instruction chain, not bytes: sorting 2048 keys in one program took 26 us at
# P = 2048 (2026-12-03), atomic ranks in chunks of 256 (several programs, two launches) 5.5.
CONFIGS = {
    "buckets": [
        (16, dict(CHUNK=16, RANK=2, num_warps=4)),
        (128, dict(CHUNK=128, RANK=1, num_warps=4)),
        (512, dict(CHUNK=512, RANK=1, num_warps=8)),
        (1 << 62, dict(CHUNK=256, RANK=1, num_warps=4)),
    ],
    "count_tile": 8192,      # histogram-table elements (chunks x bins) a program sums per loop step
    "pad_tile": 2048,        # experts x BLOCK slots a program pads per step (E=512 at once spilled registers)
    "map_tile": 4,           # blocks per step when writing an expert's expert_ids entries (decode: 1-2)
    "match_tile": 32,        # RANK=2: earlier lanes compared per step ([CHUNK, match_tile] in registers)
    "fill": 1,               # one program: the sentinel over [0, n_post_pad) before the pairs, not per expert
    "fill_tile": 1024,       # sentinel slots per step of that fill
    # Programmatic dependent launch on GPUs that have it (compute capability 9+): a kernel may start while the one
    # before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one start
    # at once (gdc_launch_dependents). 1: where the call launches two kernels (the count, then the placement),
    # which then overlap; 2: every launch, one-launch calls too; 0: none. On an H100 (2026-12-05,
    # benchmarks/results/session22_h100.md, one timing a shape, PDL on every launch) it took 0.85 / 0.83 of the
    # time at T = 256 (two launches: 5.20 / 5.19 us at E = 128 / 256 against 6.09 / 6.22), and 0.98-1.04 at
    # T = 16-64 (one launch: 3.03 / 4.84 / 5.28 against 3.09 / 4.74 / 5.06, where there is nothing of its own to
    # overlap). Not yet timed on the H200.
    "PDL": 1,
}
SEARCH_SPACE = {"RANK": [0, 1, 2], "CHUNK": [128, 256, 512, 1024, 2048, 4096], "fill": [0, 1], "PDL": [0, 1, 2]}


@triton.jit
def _moe_align_block_size_ids(ids_ptr, stride_t, stride_j, c, P, K: tl.constexpr, CHUNK: tl.constexpr):
    pair = c * CHUNK + tl.arange(0, CHUNK)
    valid = pair < P
    e = tl.load(ids_ptr + (pair // K) * stride_t + (pair % K) * stride_j, mask=valid, other=0)
    return pair, valid, e


@triton.jit
def _moe_align_block_size_hist(e, valid, NUM_BINS: tl.constexpr):
    # Lanes past the last pair loaded expert 0: their count comes back out of bin 0.
    extra = tl.sum((valid == 0).to(tl.int32), 0)
    return tl.histogram(e, NUM_BINS) - tl.where(tl.arange(0, NUM_BINS) == 0, extra, 0)


@triton.jit
def _moe_align_block_size_count_kernel(ids_ptr, stride_t, stride_j, counts_ptr, P,
                                       K: tl.constexpr, CHUNK: tl.constexpr, NUM_BINS: tl.constexpr,
                                       USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    c = tl.program_id(0)
    _, valid, e = _moe_align_block_size_ids(ids_ptr, stride_t, stride_j, c, P, K, CHUNK)
    tl.store(counts_ptr + c * NUM_BINS + tl.arange(0, NUM_BINS), _moe_align_block_size_hist(e, valid, NUM_BINS))


@triton.jit
def _moe_align_block_size_kernel(ids_ptr, stride_t, stride_j, counts_ptr, cursor_ptr, sorted_ptr, expert_ids_ptr,
                                 n_post_pad_ptr, P, E, num_chunks,
                                 K: tl.constexpr, CHUNK: tl.constexpr, NUM_BINS: tl.constexpr, BLOCK: tl.constexpr,
                                 ONE_CHUNK: tl.constexpr, COUNT_ROWS: tl.constexpr, EXPERTS: tl.constexpr,
                                 EXPERT_TILE: tl.constexpr, MAP_TILE: tl.constexpr,
                                 RANK: tl.constexpr, MATCH_TILE: tl.constexpr, DIRECT: tl.constexpr,
                                 FILL: tl.constexpr, FILL_TILE: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    c = tl.program_id(0)
    pair, valid, e = _moe_align_block_size_ids(ids_ptr, stride_t, stride_j, c, P, K, CHUNK)
    bins = tl.arange(0, NUM_BINS)
    if ONE_CHUNK:
        mine = _moe_align_block_size_hist(e, valid, NUM_BINS)
        totals = mine
        before = tl.zeros([NUM_BINS], dtype=tl.int32)
    else:
        mine = tl.load(counts_ptr + c * NUM_BINS + bins)
        totals = tl.zeros([NUM_BINS], dtype=tl.int32)
        before = tl.zeros([NUM_BINS], dtype=tl.int32)
        for r0 in range(0, num_chunks, COUNT_ROWS):
            rows = r0 + tl.arange(0, COUNT_ROWS)
            tile = tl.load(counts_ptr + rows[:, None] * NUM_BINS + bins[None, :], mask=rows[:, None] < num_chunks,
                           other=0)
            totals += tl.sum(tile, 0)
            before += tl.sum(tl.where(rows[:, None] < c, tile, 0), 0)
    padded = (totals + BLOCK - 1) // BLOCK * BLOCK
    start = tl.cumsum(padded, 0) - padded
    base = start + before                     # this chunk's first slot in each expert's group

    if FILL:
        # One program: the sentinel over [0, n_post_pad) first and the pairs on top of it after the barrier,
        # instead of an experts x BLOCK tile of masked sentinel stores (E * BLOCK lanes of instructions in a
        # program whose time is its instruction count).
        total = tl.sum(padded, 0)
        for f0 in range(0, total, FILL_TILE):
            f = f0 + tl.arange(0, FILL_TILE)
            tl.store(sorted_ptr + f, P, mask=f < total)
        tl.debug_barrier()

    if RANK == 1:
        # A private counter row per chunk, seeded with its bases; the barrier orders the seeds before the adds.
        row = cursor_ptr + c * NUM_BINS
        tl.store(row + bins, base)
        tl.debug_barrier()
        dest = tl.atomic_add(row + e, 1, mask=valid)
        tl.store(sorted_ptr + dest, pair, mask=valid)
    elif RANK == 2:
        # Rank = earlier lanes of this chunk routed to the same expert. The earlier lanes' experts are loaded
        # again, MATCH_TILE at a time (an L1 hit), rather than sliced out of registers (Triton cannot); a
        # loop, not unrolled, so the loads are not all hoisted into registers at once.
        lane = tl.arange(0, CHUNK)
        rank = tl.zeros([CHUNK], dtype=tl.int32)
        for j0 in range(0, CHUNK, MATCH_TILE):
            _, valid_j, e_j = _moe_align_block_size_ids(ids_ptr, stride_t, stride_j, c * (CHUNK // MATCH_TILE)
                                                        + j0 // MATCH_TILE, P, K, MATCH_TILE)
            lane_j = j0 + tl.arange(0, MATCH_TILE)
            same = (e[:, None] == e_j[None, :]) & (lane_j[None, :] < lane[:, None]) & valid_j[None, :]
            rank += tl.sum(same.to(tl.int32), 1)
        tl.store(sorted_ptr + tl.gather(base, e, 0) + rank, pair, mask=valid)
    else:
        lane = tl.arange(0, CHUNK)
        key = tl.sort(tl.where(valid, e, NUM_BINS) * CHUNK + lane)     # pad lanes sort last
        ke = key // CHUNK
        real = ke < NUM_BINS
        ke = tl.where(real, ke, 0)
        first_local = tl.cumsum(mine, 0) - mine
        dest = tl.gather(base, ke, 0) + lane - tl.gather(first_local, ke, 0)
        tl.store(sorted_ptr + dest, c * CHUNK + key % CHUNK, mask=real)

    # This program's slice of experts, EXPERT_TILE at a time (register-sized tiles of experts x BLOCK):
    # their padding sentinels and their blocks' expert_ids entries.
    for x0 in tl.static_range(0, EXPERTS, EXPERT_TILE):
        ex = c * EXPERTS + x0 + tl.arange(0, EXPERT_TILE)
        if DIRECT:
            # One program, one tile of every bin: the slice is the histogram itself (bins past E count 0).
            cnt = totals
            st = start
            pd = padded
        else:
            live = ex < E
            exc = tl.where(live, ex, 0)
            cnt = tl.gather(totals, exc, 0)
            st = tl.gather(start, exc, 0)
            pd = tl.where(live, tl.gather(padded, exc, 0), 0)
        if not FILL:
            slot = cnt[:, None] + tl.arange(0, BLOCK)[None, :]
            tl.store(sorted_ptr + st[:, None] + slot, P, mask=slot < pd[:, None])
        n_blk = pd // BLOCK
        for m0 in range(0, tl.max(n_blk, 0), MAP_TILE):
            m = m0 + tl.arange(0, MAP_TILE)
            tl.store(expert_ids_ptr + (st // BLOCK)[:, None] + m[None, :], ex[:, None] + 0 * m[None, :],
                     mask=m[None, :] < n_blk[:, None])
    if c == 0:
        tl.store(n_post_pad_ptr, tl.sum(padded, 0))


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _pick_config(P: int) -> dict:
    for bound, cfg in CONFIGS["buckets"]:
        if P <= bound:
            return cfg
    return CONFIGS["buckets"][-1][1]


def moe_align_block_size(topk_ids, E=128, block=16):
    if topk_ids.dim() != 2 or block < 1 or block & (block - 1) or E < 1:
        raise ValueError(f"moe_align_block_size expects topk_ids[T,k], E >= 1 and a power-of-two block; got "
                         f"topk_ids {tuple(topk_ids.shape)}, E={E}, block={block}")
    T, k = topk_ids.shape
    P = T * k
    n_blocks = triton.cdiv(P + min(E, P) * (block - 1), block)
    dev = topk_ids.device
    sorted_ids = torch.empty(n_blocks * block, dtype=torch.int32, device=dev)
    expert_ids = torch.empty(n_blocks, dtype=torch.int32, device=dev)
    n_post_pad = torch.empty(1, dtype=torch.int32, device=dev)
    cfg = _pick_config(P)
    chunk = cfg["CHUNK"]
    num_chunks = triton.cdiv(P, chunk)
    if num_chunks == 1:
        chunk = max(16, triton.next_power_of_2(P))
    num_bins = max(16, triton.next_power_of_2(E))
    table = (num_chunks, num_bins)
    counts = torch.empty(table, dtype=torch.int32, device=dev) if num_chunks > 1 else n_post_pad
    cursor = torch.empty(table, dtype=torch.int32, device=dev) if cfg["RANK"] == 1 else n_post_pad
    strides = (topk_ids.stride(0), topk_ids.stride(1))
    experts = triton.next_power_of_2(triton.cdiv(E, num_chunks))
    fill = num_chunks == 1 and bool(CONFIGS["fill"])
    # With the fill there are no sentinel tiles: one tile of every expert writes the expert_ids entries.
    expert_tile = experts if fill else min(experts, max(1, CONFIGS["pad_tile"] // block))
    match_tile = min(chunk, CONFIGS["match_tile"])
    pdl = _pdl(topk_ids) and (num_chunks > 1 or CONFIGS["PDL"] == 2)
    if num_chunks > 1:
        _moe_align_block_size_count_kernel[(num_chunks,)](topk_ids, *strides, counts, P, K=k, CHUNK=chunk,
                                                          NUM_BINS=num_bins, USE_PDL=pdl, launch_pdl=pdl,
                                                          num_warps=cfg["num_warps"])
    _moe_align_block_size_kernel[(num_chunks,)](
        topk_ids, *strides, counts, cursor, sorted_ids, expert_ids, n_post_pad, P, E, num_chunks,
        K=k, CHUNK=chunk, NUM_BINS=num_bins, BLOCK=block, ONE_CHUNK=num_chunks == 1,
        COUNT_ROWS=max(1, CONFIGS["count_tile"] // num_bins),
        EXPERTS=experts, EXPERT_TILE=expert_tile, MAP_TILE=CONFIGS["map_tile"], RANK=cfg["RANK"],
        MATCH_TILE=match_tile, DIRECT=num_chunks == 1 and expert_tile == num_bins, FILL=fill,
        FILL_TILE=CONFIGS["fill_tile"], USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return sorted_ids, expert_ids, n_post_pad
