# expect: accept
# op: gated_rms_norm
# needs: cpu
# why: a 2-D tile of several rows per program (narrow 128-wide heads), norm first and gate second, all in fp32, sigmoid via exp2
import torch
import triton
import triton.language as tl


@triton.jit
def _gated_rms_norm_kernel(x_ptr, z_ptr, w_ptr, y_ptr, T, H, sx, sz, sy, eps, ROWS: tl.constexpr,
                           BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < T)[:, None] & (cols < H)[None, :]
    x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + rows[:, None] * sz + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < H, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / H + eps)
    gate = z / (1.0 + tl.exp2(-z * 1.4426950408889634))
    y = x * rstd[:, None] * w[None, :] * gate
    tl.store(y_ptr + rows[:, None] * sy + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def gated_rms_norm(x, z, weight, eps=1e-6):
    x, z = x.contiguous(), z.contiguous()
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(H)
    rows = max(1, 2048 // block)
    _gated_rms_norm_kernel[(triton.cdiv(T, rows),)](x, z, weight, y, T, H, x.stride(0), z.stride(0), y.stride(0),
                                                     eps, ROWS=rows, BLOCK=block)
    return y
