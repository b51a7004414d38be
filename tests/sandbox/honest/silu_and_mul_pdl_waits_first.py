# expect: accept
# op: silu_and_mul
# needs: cpu
# why: programmatic dependent launch where it exists (a GPU of compute capability 9 or more): the kernel's first
# statement waits for the kernel before it (gdc_wait, gated on the same value as launch_pdl, since the interpreter has
# no griddepcontrol) and it lets the next one start after its loads (gdc_launch_dependents)
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, y_ptr, I, stride_x, stride_y, BLOCK: tl.constexpr, USE_PDL: tl.constexpr):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * stride_x + I + cols, mask=mask, other=0.0).to(tl.float32)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(y_ptr + row * stride_y + cols, (g / (1.0 + tl.exp(-g)) * u).to(y_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, two_i = x.shape
    I = two_i // 2
    y = torch.empty((T, I), device=x.device, dtype=x.dtype)
    pdl = x.is_cuda and torch.cuda.get_device_capability(x.device)[0] >= 9
    BLOCK = min(1024, triton.next_power_of_2(I))
    _silu_and_mul_kernel[(T, triton.cdiv(I, BLOCK))](x, y, I, x.stride(0), y.stride(0), BLOCK=BLOCK, USE_PDL=pdl,
                                                     launch_pdl=pdl)
    return y
