# expect: accept
# op: silu_and_mul
# needs: cpu
# why: a 2D grid of (token block, column block) tiles; gate and up read from the two halves of x
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_tile_kernel(x_ptr, out_ptr, T, I, stride_x, stride_out,
                              BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr):
    pid_t = tl.program_id(0)
    pid_i = tl.program_id(1)
    rows = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = (rows[:, None] < T) & (cols[None, :] < I)
    base = x_ptr + rows[:, None] * stride_x + cols[None, :]
    gate = tl.load(base, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(base + I, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, two_i = x.shape
    I = two_i // 2
    out = torch.empty((T, I), device=x.device, dtype=x.dtype)
    BLOCK_T, BLOCK_I = 8, 64

    def grid(meta):
        return (triton.cdiv(T, meta["BLOCK_T"]), triton.cdiv(I, meta["BLOCK_I"]))

    _silu_and_mul_tile_kernel[grid](x, out, T, I, x.stride(0), out.stride(0), BLOCK_T=BLOCK_T, BLOCK_I=BLOCK_I)
    return out
