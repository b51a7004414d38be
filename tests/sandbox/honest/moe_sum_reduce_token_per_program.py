# expect: accept
# op: moe_sum_reduce
# needs: cpu
# why: one program per token over the whole hidden row in chunks, k as a runtime loop, fp32 accumulation of weight * expert row
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_sum_reduce_kernel(x_ptr, w_ptr, y_ptr, K, H, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    for start in range(0, H, BLOCK):
        mask = start + cols < H
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(K):
            w = tl.load(w_ptr + t * K + j)
            x = tl.load(x_ptr + (t * K + j) * H + start + cols, mask=mask, other=0.0).to(tl.float32)
            acc += w * x
        tl.store(y_ptr + t * H + start + cols, acc.to(y_ptr.dtype.element_ty), mask=mask)


def moe_sum_reduce(x, weights):
    x, weights = x.contiguous(), weights.contiguous()
    T, K, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _moe_sum_reduce_kernel[(T,)](x, weights, y, K, H, BLOCK=256)
    return y
