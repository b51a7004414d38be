# expect: accept
# op: silu_and_mul
# needs: cpu
# why: a flat 1-D grid over all T*I outputs (the shape an inductor-style pointwise kernel takes); row and
# column come from integer division, and SiLU is written out with exp instead of tl.sigmoid
import torch
import triton
import triton.language as tl

CONFIGS = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def _silu_and_mul_flat_kernel(x_ptr, out_ptr, n, I, stride_x, stride_out, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    row = idx // I
    col = idx % I
    gate = tl.load(x_ptr + row * stride_x + col, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + I + col, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * stride_out + col, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, two_i = x.shape
    I = two_i // 2
    out = torch.empty((T, I), device=x.device, dtype=x.dtype)
    n = T * I
    grid = (triton.cdiv(n, CONFIGS["BLOCK"]),)
    _silu_and_mul_flat_kernel[grid](x, out, n, I, x.stride(0), out.stride(0), BLOCK=CONFIGS["BLOCK"],
                                    num_warps=CONFIGS["num_warps"])
    return out
