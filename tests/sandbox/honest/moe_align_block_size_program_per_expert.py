# expect: accept
# op: moe_align_block_size
# needs: cpu
# why: one program per expert, each re-counting every expert to find its group's start, padding sentinels written first and the expert's pairs after them (another valid order than the reference's), expert_ids per program
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_align_block_size_expert_kernel(ids_ptr, stride_t, stride_j, sorted_ptr, expert_ids_ptr, n_ptr, P,
                                        K: tl.constexpr, NUM_BINS: tl.constexpr, BLOCK: tl.constexpr,
                                        TILE: tl.constexpr):
    e = tl.program_id(0)
    bins = tl.arange(0, NUM_BINS)
    counts = tl.zeros([NUM_BINS], dtype=tl.int32)
    for p0 in range(0, P, TILE):
        p = p0 + tl.arange(0, TILE)
        ids = tl.load(ids_ptr + (p // K) * stride_t + (p % K) * stride_j, mask=p < P, other=NUM_BINS - 1)
        # masked lanes counted in the last bin, which no expert below NUM_BINS - 1 reads
        counts += tl.histogram(ids, NUM_BINS) - tl.where(bins == NUM_BINS - 1, tl.sum((p >= P).to(tl.int32), 0), 0)
    padded = (counts + BLOCK - 1) // BLOCK * BLOCK
    start = tl.sum(tl.where(bins < e, padded, 0), 0)
    mine = tl.sum(tl.where(bins == e, counts, 0), 0)
    my_padded = tl.sum(tl.where(bins == e, padded, 0), 0)
    n_pad = my_padded - mine
    j = tl.arange(0, BLOCK)
    tl.store(sorted_ptr + start + j, P, mask=j < n_pad)
    written = start + n_pad
    for p0 in range(0, P, TILE):
        p = p0 + tl.arange(0, TILE)
        ids = tl.load(ids_ptr + (p // K) * stride_t + (p % K) * stride_j, mask=p < P, other=-1)
        hit = (ids == e).to(tl.int32)
        at = written + tl.cumsum(hit, 0) - 1
        tl.store(sorted_ptr + at, p, mask=hit > 0)
        written += tl.sum(hit, 0)
    for b0 in range(0, my_padded // BLOCK, TILE):
        b = b0 + tl.arange(0, TILE)
        tl.store(expert_ids_ptr + start // BLOCK + b, e + 0 * b, mask=b < my_padded // BLOCK)
    if e == 0:
        tl.store(n_ptr, tl.sum(padded, 0))


def moe_align_block_size(topk_ids, E=128, block=16):
    T, k = topk_ids.shape
    P = T * k
    n_blocks = (P + min(E, P) * (block - 1) + block - 1) // block
    sorted_ids = torch.empty(n_blocks * block, dtype=torch.int32, device=topk_ids.device)
    expert_ids = torch.empty(n_blocks, dtype=torch.int32, device=topk_ids.device)
    n_post_pad = torch.empty(1, dtype=torch.int32, device=topk_ids.device)
    # one spare bin past the experts for the masked lanes
    num_bins = triton.next_power_of_2(E + 1)
    _moe_align_block_size_expert_kernel[(E,)](topk_ids, topk_ids.stride(0), topk_ids.stride(1), sorted_ids,
                                              expert_ids, n_post_pad, P, K=k, NUM_BINS=num_bins, BLOCK=block,
                                              TILE=256)
    return sorted_ids, expert_ids, n_post_pad
