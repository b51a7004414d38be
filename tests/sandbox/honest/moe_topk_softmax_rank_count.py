# expect: accept
# op: moe_topk_softmax
# needs: cpu
# why: no argmax loop: each expert's rank is counted directly (experts with a larger logit, or an equal logit and a lower id), in chunks of the row; the k experts of rank < k are scattered to their rank's slot, weights from an fp32 softmax
import torch
import triton
import triton.language as tl


@triton.jit
def _rank_kernel(x_ptr, w_ptr, id_ptr, E, K, stride_x, RENORM: tl.constexpr, BLOCK_E: tl.constexpr,
                 CHUNK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    e = tl.arange(0, BLOCK_E)
    emask = e < E
    x = tl.load(x_ptr + t * stride_x + e, mask=emask, other=float("-inf")).to(tl.float32)
    rank = tl.zeros([BLOCK_E], dtype=tl.int32)
    for j0 in range(0, E, CHUNK):
        j = j0 + tl.arange(0, CHUNK)
        xj = tl.load(x_ptr + t * stride_x + j, mask=j < E, other=float("-inf")).to(tl.float32)
        before = (xj[None, :] > x[:, None]) | ((xj[None, :] == x[:, None]) & (j[None, :] < e[:, None]))
        before = before & (j < E)[None, :]
        rank += tl.sum(before.to(tl.int32), axis=1)
    p = tl.where(emask, tl.exp(x - tl.max(x, axis=0)), 0.0)
    chosen = emask & (rank < K)
    if RENORM:
        z = tl.sum(tl.where(chosen, p, 0.0), axis=0)
    else:
        z = tl.sum(p, axis=0)
    tl.store(w_ptr + t * K + rank, p / z, mask=chosen)
    tl.store(id_ptr + t * K + rank, e, mask=chosen)


def moe_topk_softmax(logits, k=8, renormalize=True):
    T, E = logits.shape
    weights = torch.empty((T, k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((T, k), dtype=torch.int32, device=logits.device)
    _rank_kernel[(T,)](logits, weights, ids, E, k, logits.stride(0), RENORM=bool(renormalize),
                       BLOCK_E=triton.next_power_of_2(E), CHUNK=32)
    return weights, ids
