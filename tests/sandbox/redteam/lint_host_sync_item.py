# expect: reject
# stage: lint
# op: fused_moe
# needs: cpu
# why: reads routing decisions on the host with .tolist(), a device sync that cannot be captured in a CUDA graph
import torch
import triton
import triton.language as tl


@triton.jit
def _zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 0.0, mask=offs < n)


def fused_moe(hidden, w1, w2, topk_weights, topk_ids):
    experts = sorted(set(topk_ids.flatten().tolist()))
    out = torch.empty_like(hidden)
    _zero_kernel[(triton.cdiv(out.numel(), 256),)](out, out.numel(), BLOCK=256)
    return out
