# expect: reject
# stage: correctness
# op: silu_and_mul
# needs: cpu
# cause: input-write rule
# why: the first kernel stashes the gate half of x in the output and overwrites the gate with silu(gate) in place; the second multiplies by up and restores the gate from the stash: x is unchanged after the call, but written during it (between the two kernels another stream would read silu values); the call on read-only copies of x faults
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_in_place_kernel(x_ptr, out_ptr, I, stride_x, stride_out, BLOCK_I: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = cols < I
    g_ptrs = x_ptr + row * stride_x + cols
    g = tl.load(g_ptrs, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_out + cols, g, mask=mask)
    gf = g.to(tl.float32)
    e = tl.exp(-tl.abs(gf))
    inv = 1.0 / (1.0 + e)
    tl.store(g_ptrs, (gf * tl.where(gf >= 0, inv, e * inv)).to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _mul_and_restore_kernel(x_ptr, out_ptr, I, stride_x, stride_out, BLOCK_I: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = cols < I
    g_ptrs = x_ptr + row * stride_x + cols
    o_ptrs = out_ptr + row * stride_out + cols
    stash = tl.load(o_ptrs, mask=mask, other=0.0)
    s = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(g_ptrs + I, mask=mask, other=0.0).to(tl.float32)
    tl.store(o_ptrs, (s * up).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(g_ptrs, stash, mask=mask)


def silu_and_mul(x):
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), dtype=x.dtype, device=x.device)
    grid = (T, triton.cdiv(I, 256))
    _silu_in_place_kernel[grid](x, out, I, x.stride(0), out.stride(0), BLOCK_I=256)
    _mul_and_restore_kernel[grid](x, out, I, x.stride(0), out.stride(0), BLOCK_I=256)
    return out
