# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: launched with programmatic dependent launch (launch_pdl=True) and no gdc_wait: it may read x while the kernel
# before it in the stream still writes it; the timer's kernel before a call is the L2 flush, which writes none of
# the inputs, so only the lint can see it
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, y_ptr, I, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * stride_x + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (g / (1.0 + tl.exp(-g)) * u).to(y_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, two_i = x.shape
    I = two_i // 2
    y = torch.empty((T, I), device=x.device, dtype=x.dtype)
    BLOCK = min(1024, triton.next_power_of_2(I))
    _silu_and_mul_kernel[(T, triton.cdiv(I, BLOCK))](x, y, I, x.stride(0), y.stride(0), BLOCK=BLOCK,
                                                     launch_pdl=x.is_cuda)
    return y
