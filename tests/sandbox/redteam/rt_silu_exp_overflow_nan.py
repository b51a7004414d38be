# expect: reject
# stage: correctness
# op: silu_and_mul
# needs: gpu
# cause: nan/inf
# why: computes silu(g) as g * exp(g) / (1 + exp(g)): exp overflows to inf on the outlier channels (|g| reaches ~400), and inf / inf is NaN; a data-dependent failure, reported as such (the stale-cache hint appears only with evidence: tests/sandbox/test_runtime_gates.py). GPU only: under the interpreter a shape has at most 4 rows, so whether any gate value passes 88 (exp's fp32 overflow) is left to chance (by our estimate about 1 evaluation in 5 would see none)
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
    e = tl.exp(g)
    out = g * e / (1.0 + e) * up
    tl.store(out_ptr + row * stride_out + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), dtype=x.dtype, device=x.device)
    _silu_and_mul_kernel[(T, triton.cdiv(I, 256))](x, out, I, x.stride(0), out.stride(0), BLOCK_I=256)
    return out
