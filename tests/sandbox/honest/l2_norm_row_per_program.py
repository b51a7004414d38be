# expect: accept
# op: l2_norm
# needs: cpu
# why: one program per row, the row in chunks of a fixed block: sum of squares in fp32, then a second pass that scales and stores
import torch
import triton
import triton.language as tl


@triton.jit
def _l2_norm_kernel(x_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        mask = start + cols < H
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), eps)
    for start in range(0, H, BLOCK):
        mask = start + cols < H
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + start + cols, (x * inv).to(y_ptr.dtype.element_ty), mask=mask)


def l2_norm(x, eps=1e-6):
    x = x.contiguous()
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _l2_norm_kernel[(T,)](x, y, H, x.stride(0), y.stride(0), eps, BLOCK=128)
    return y
