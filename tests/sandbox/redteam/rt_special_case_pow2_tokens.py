# expect: reject
# stage: correctness
# op: rms_norm
# needs: cpu
# dims: T=1 H=128 | T=4 H=256
# cause: hold-out
# why: two rows per program without a row mask, launched T // 2 times: right for every power-of-two T (all visible shapes), the last row is never written when T is odd (hold-out shapes)
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, ROWS: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_H)
    mask = cols[None, :] < H
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < H, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / H + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    rows = 1 if T == 1 else 2
    _rms_norm_kernel[(T // rows,)](x, weight, y, H, x.stride(0), y.stride(0), eps, ROWS=rows,
                                   BLOCK_H=triton.next_power_of_2(H))
    return y
