# expect: accept
# op: silu_and_mul
# needs: gpu
# why: computes the sigmoid with libdevice.exp and libdevice.fast_dividef from triton.language.extra.libdevice; accepted on a GPU; under the CPU interpreter the verdict carries interpreter_limitation instead of a candidate fault
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, I, stride_x, stride_out, BLOCK_I: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = cols < I
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + I + cols, mask=mask, other=0.0).to(tl.float32)
    e = libdevice.exp(-tl.abs(g))                       # never overflows: |g| reaches ~400 on outlier channels
    inv = libdevice.fast_dividef(1.0, 1.0 + e)
    out = g * tl.where(g >= 0, inv, e * inv) * up
    tl.store(out_ptr + row * stride_out + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), dtype=x.dtype, device=x.device)
    _silu_and_mul_kernel[(T, triton.cdiv(I, 256))](x, out, I, x.stride(0), out.stride(0), BLOCK_I=256)
    return out
