# expect: accept
# op: silu_and_mul
# needs: cpu
# why: the launch goes through functools.partial(kernel[grid], ...) with the constexprs bound first, then
# the tensors and sizes passed at the call (POLICY.md section 1)
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_rows_kernel(x_ptr, out_ptr, I, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (gate * tl.sigmoid(gate) * up).to(out_ptr.dtype.element_ty),
             mask=mask)


def silu_and_mul(x):
    T, two_i = x.shape
    I = two_i // 2
    out = torch.empty((T, I), device=x.device, dtype=x.dtype)
    BLOCK = min(triton.next_power_of_2(I), 1024)
    run = functools.partial(_silu_and_mul_rows_kernel[(T, triton.cdiv(I, BLOCK))], BLOCK=BLOCK, num_warps=4)
    run(x, out, I, x.stride(0), out.stride(0))
    return out
