# expect: accept
# op: rms_norm
# needs: cpu
# why: several rows per program and a loop over H in chunks (two passes), so any H fits one config
import torch
import triton
import triton.language as tl

CONFIGS = {"ROWS": 4, "BLOCK_H": 64, "num_warps": 4}


@triton.jit
def _rms_norm_rows_kernel(x_ptr, w_ptr, out_ptr, T, H, stride_x, stride_out, eps,
                          ROWS: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < T
    sum_sq = tl.zeros((ROWS,), dtype=tl.float32)
    for start in range(0, H, BLOCK_H):
        cols = start + tl.arange(0, BLOCK_H)
        mask = row_mask[:, None] & (cols[None, :] < H)
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        sum_sq += tl.sum(x * x, axis=1)
    rstd = tl.rsqrt(sum_sq / H + eps)
    for start in range(0, H, BLOCK_H):
        cols = start + tl.arange(0, BLOCK_H)
        mask = row_mask[:, None] & (cols[None, :] < H)
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < H, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    out = torch.empty_like(x)
    rows = CONFIGS["ROWS"]
    grid = (triton.cdiv(T, rows),)
    _rms_norm_rows_kernel[grid](x, weight, out, T, H, x.stride(0), out.stride(0), eps,
                                ROWS=rows, BLOCK_H=CONFIGS["BLOCK_H"], num_warps=CONFIGS["num_warps"])
    return out
