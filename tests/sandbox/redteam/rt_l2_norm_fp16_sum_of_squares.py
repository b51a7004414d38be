# expect: reject
# stage: correctness
# op: l2_norm
# needs: cpu
# cause: exceed
# why: squares and sums the row in fp16 to halve register use: about 1e-3 relative error everywhere (100x the fp32 bound) and inf on outlier rows whose sum passes 65504
import torch
import triton
import triton.language as tl


@triton.jit
def _l2_norm_kernel(x_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    xh = x.to(tl.float16)
    sum_sq = tl.sum(xh * xh, axis=0)
    inv = 1.0 / tl.maximum(tl.sqrt(sum_sq.to(tl.float32)), eps)
    tl.store(y_ptr + row * stride_y + cols, (x.to(tl.float32) * inv).to(y_ptr.dtype.element_ty), mask=mask)


def l2_norm(x, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _l2_norm_kernel[(T,)](x, y, H, x.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(H))
    return y
