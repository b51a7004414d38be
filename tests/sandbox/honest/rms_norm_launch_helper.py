# expect: accept
# op: rms_norm
# needs: cpu
# why: the kernel is passed by name to a launch helper that launches it as kernel[grid](...) with a grid
# lambda reading the meta-parameters (POLICY.md section 1: launch helpers and grid callables)
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_rows_kernel(x_ptr, w_ptr, out_ptr, T, H, stride_x, stride_out, eps,
                          ROWS: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_H)
    mask = (rows[:, None] < T) & (cols[None, :] < H)
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / H + eps)
    w = tl.load(w_ptr + cols, mask=cols < H, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, grid, x2, weight, out, eps, rows):
    T, H = x2.shape
    kernel[grid](x2, weight, out, T, H, x2.stride(0), out.stride(0), eps,
                 ROWS=rows, BLOCK_H=triton.next_power_of_2(H), num_warps=4)


def rms_norm(x, weight, eps=1e-6):
    H = x.shape[-1]
    x2 = x.reshape(-1, H).contiguous()
    out = torch.empty_like(x2)
    _launch(_rms_norm_rows_kernel, lambda meta: (triton.cdiv(meta["T"], meta["ROWS"]),), x2, weight, out, eps, 2)
    return out.view(x.shape)
