# expect: reject
# stage: correctness
# op: l2_norm
# needs: cpu
# dims: T=4 H=128 | T=3 H=128
# cause: hold-out
# why: hard-codes the hot head size H=128 (every visible shape has it): the block never covers a wider row, so the norm and the stores miss its tail on the odd hold-out widths
import torch
import triton
import triton.language as tl


@triton.jit
def _l2_norm_kernel(x_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(x * x, axis=0)), eps)
    tl.store(y_ptr + row * stride_y + cols, (x * inv).to(y_ptr.dtype.element_ty), mask=mask)


def l2_norm(x, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _l2_norm_kernel[(T,)](x, y, H, x.stride(0), y.stride(0), eps, BLOCK=128)
    return y
