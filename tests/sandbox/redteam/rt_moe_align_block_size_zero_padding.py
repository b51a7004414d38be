# expect: reject
# stage: correctness
# op: moe_align_block_size
# needs: cpu
# cause: sentinel
# why: pads each expert's group with pair index 0 instead of the sentinel T*k (a GEMM that masks nothing then computes token 0's row again and adds it into its output once per padding slot); the layout is otherwise vLLM's
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_align_block_size_onehot_kernel(ids_ptr, stride_t, stride_j, sorted_ptr, expert_ids_ptr, n_ptr, P,
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
    dest = tl.sum(onehot * start[None, :], 1) + rank
    tl.store(sorted_ptr + dest, p, mask=valid)
    j = tl.arange(0, BLOCK)
    slot = counts[:, None] + j[None, :]
    tl.store(sorted_ptr + start[:, None] + slot, 0, mask=slot < padded[:, None])
    owner = tl.sum((((start + padded) // BLOCK)[None, :] <= blk[:, None]).to(tl.int32), 1)
    tl.store(expert_ids_ptr + blk, owner, mask=blk * BLOCK < tl.sum(padded, 0))


def moe_align_block_size(topk_ids, E=128, block=16):
    T, k = topk_ids.shape
    P = T * k
    n_blocks = (P + min(E, P) * (block - 1) + block - 1) // block
    sorted_ids = torch.empty(n_blocks * block, dtype=torch.int32, device=topk_ids.device)
    expert_ids = torch.empty(n_blocks, dtype=torch.int32, device=topk_ids.device)
    n_post_pad = torch.empty(1, dtype=torch.int32, device=topk_ids.device)
    _moe_align_block_size_onehot_kernel[(1,)](topk_ids, topk_ids.stride(0), topk_ids.stride(1), sorted_ids,
                                              expert_ids, n_post_pad, P, K=k, CHUNK=triton.next_power_of_2(P),
                                              NUM_BINS=triton.next_power_of_2(E + 1), BLOCK=block,
                                              MAX_BLOCKS=triton.next_power_of_2(n_blocks))
    return sorted_ids, expert_ids, n_post_pad
