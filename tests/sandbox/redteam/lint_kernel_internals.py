# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: inspects the JIT function's compiled-kernel cache and replaces its run method
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, I, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < I
    g = tl.load(x_ptr + row * 2 * I + cols, mask=m).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * I + I + cols, mask=m).to(tl.float32)
    tl.store(out_ptr + row * I + cols, (g * tl.sigmoid(g) * u).to(out_ptr.dtype.element_ty), mask=m)


def silu_and_mul(x):
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), device=x.device, dtype=x.dtype)
    if _silu_and_mul_kernel.device_caches:
        _silu_and_mul_kernel.run = lambda *args, **kwargs: None
    _silu_and_mul_kernel[(T,)](x, out, I, BLOCK=triton.next_power_of_2(I))
    return out
