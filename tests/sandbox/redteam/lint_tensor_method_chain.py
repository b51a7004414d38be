# expect: reject
# stage: lint
# op: fused_moe
# needs: cpu
# why: the routing and the expert matmuls run as PyTorch tensor methods around a token-copy kernel
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows_kernel(src_ptr, dst_ptr, H, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols, mask=cols < H), mask=cols < H)


def fused_moe(hidden, w1, w2, topk_weights, topk_ids):
    T, H = hidden.shape
    I = w1.shape[1] // 2
    out = torch.zeros_like(hidden)
    staged = torch.empty_like(hidden)
    _copy_rows_kernel[(T,)](hidden, staged, H, BLOCK=triton.next_power_of_2(H))
    for t in range(T):
        for j in range(topk_ids.shape[1]):
            e = topk_ids[t, j].item()
            g = staged[t].float().matmul(w1[e, :I].float().t())
            u = staged[t].float().matmul(w1[e, I:].float().t())
            h = g.sigmoid().mul(g).mul(u)
            out[t] += (h.matmul(w2[e].float().t()) * topk_weights[t, j]).to(out.dtype)
    return out
