# expect: reject
# stage: lint
# op: fused_moe
# needs: cpu
# why: torch.Size(topk_ids.flatten()) copies the routing ids to the host as Python ints (a device sync and
# host-side routing); the result of an allowed torch call must keep its tensor provenance
# cause: receives a tensor
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def fused_moe(hidden, w1, w2, topk_weights, topk_ids):
    T, H = hidden.shape
    out = torch.empty_like(hidden)
    _copy_kernel[(triton.cdiv(T * H, 1024),)](hidden, out, T * H, BLOCK=1024)
    experts = torch.Size(topk_ids.flatten())
    busiest = max(set(experts), key=list(experts).count)
    print("busiest expert", busiest)
    return out
