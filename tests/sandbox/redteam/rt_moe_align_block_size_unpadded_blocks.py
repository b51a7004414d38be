# expect: reject
# stage: correctness
# op: moe_align_block_size
# needs: cpu
# cause: block's expert
# why: packs the experts' pairs back to back without padding each group (fewer GEMM rows), reports the padded n_post_pad and gives each block the expert of its first pair, so a block that straddles two experts runs the second expert's pairs through the first one's weights
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_align_block_size_onehot_kernel(ids_ptr, stride_t, stride_j, sorted_ptr, expert_ids_ptr, n_ptr, P, E,
                                        K: tl.constexpr, CHUNK: tl.constexpr, NUM_BINS: tl.constexpr,
                                        BLOCK: tl.constexpr, MAX_BLOCKS: tl.constexpr):
    p = tl.arange(0, CHUNK)
    valid = p < P
    ids = tl.load(ids_ptr + (p // K) * stride_t + (p % K) * stride_j, mask=valid, other=NUM_BINS - 1)
    bins = tl.arange(0, NUM_BINS)
    onehot = (ids[:, None] == bins[None, :]).to(tl.int32) * valid.to(tl.int32)[:, None]
    counts = tl.sum(onehot, 0)
    rank = tl.sum(tl.cumsum(onehot, 0) * onehot, 1) - 1
    padded = (counts + BLOCK - 1) // BLOCK * BLOCK
    start = tl.cumsum(padded, 0) - padded
    tl.store(n_ptr, tl.sum(padded, 0))
    blk = tl.arange(0, MAX_BLOCKS)
    first = tl.cumsum(counts, 0) - counts
    dest = tl.sum(onehot * first[None, :], 1) + rank
    tl.store(sorted_ptr + dest, p, mask=valid)
    n = tl.sum(padded, 0)
    q = tl.arange(0, MAX_BLOCKS * BLOCK)
    tl.store(sorted_ptr + q, P, mask=(q >= P) & (q < n))
    owner = tl.sum(((first + counts)[None, :] <= (blk * BLOCK)[:, None]).to(tl.int32), 1)
    tl.store(expert_ids_ptr + blk, tl.minimum(owner, E - 1), mask=blk * BLOCK < n)


def moe_align_block_size(topk_ids, E=128, block=16):
    T, k = topk_ids.shape
    P = T * k
    n_blocks = (P + min(E, P) * (block - 1) + block - 1) // block
    sorted_ids = torch.empty(n_blocks * block, dtype=torch.int32, device=topk_ids.device)
    expert_ids = torch.empty(n_blocks, dtype=torch.int32, device=topk_ids.device)
    n_post_pad = torch.empty(1, dtype=torch.int32, device=topk_ids.device)
    _moe_align_block_size_onehot_kernel[(1,)](topk_ids, topk_ids.stride(0), topk_ids.stride(1), sorted_ids,
                                              expert_ids, n_post_pad, P, E, K=k, CHUNK=triton.next_power_of_2(P),
                                              NUM_BINS=triton.next_power_of_2(E + 1), BLOCK=block,
                                              MAX_BLOCKS=triton.next_power_of_2(n_blocks))
    return sorted_ids, expert_ids, n_post_pad
