# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: a kernel is defined but never launched; the launcher returns a fresh buffer
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
    return torch.empty((x.shape[0], x.shape[1] // 2), device=x.device, dtype=x.dtype)
