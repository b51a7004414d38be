# expect: reject
# stage: lint
# op: fused_moe
# needs: cpu
# why: the parameters are in the wrong order and one is renamed (topk_ids before topk_weights, w_gate)
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 0.0, mask=offs < n)


def fused_moe(hidden, w_gate, w2, topk_ids, topk_weights):
    out = torch.empty_like(hidden)
    _moe_kernel[(triton.cdiv(out.numel(), 256),)](out, out.numel(), BLOCK=256)
    return out
