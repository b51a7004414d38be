# expect: reject
# stage: correctness
# op: silu_and_mul
# needs: cpu
# cause: output layout rule
# why: allocates the output with a padded row pitch (I + 64 elements) and returns the [T, I] view: correct values, but the row stride is not I, so a consumer expecting the reference's contiguous layout reads the padding
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, I, stride_x, stride_out, BLOCK_I: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = cols < I
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + I + cols, mask=mask, other=0.0).to(tl.float32)
    e = tl.exp(-tl.abs(g))
    inv = 1.0 / (1.0 + e)
    out = g * tl.where(g >= 0, inv, e * inv) * up
    tl.store(out_ptr + row * stride_out + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, I = x.shape[0], x.shape[1] // 2
    padded = torch.empty((T, I + 64), dtype=x.dtype, device=x.device)
    out = padded[:, :I]
    _silu_and_mul_kernel[(T, triton.cdiv(I, 256))](x, out, I, x.stride(0), out.stride(0), BLOCK_I=256)
    return out
