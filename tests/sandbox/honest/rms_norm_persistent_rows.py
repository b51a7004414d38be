# expect: accept
# op: rms_norm
# needs: cpu
# why: a persistent grid: a fixed number of programs, each striding over rows with tl.num_programs, one
# row at a time with the whole (padded) hidden size in registers
import torch
import triton
import triton.language as tl

CONFIGS = {"PROGRAMS": 132, "num_warps": 4}


@triton.jit
def _rms_norm_persistent_kernel(x_ptr, w_ptr, out_ptr, T, H, stride_x, stride_out, eps, BLOCK_H: tl.constexpr):
    cols = tl.arange(0, BLOCK_H)
    col_mask = cols < H
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    for row in range(tl.program_id(0), T, tl.num_programs(0)):
        x = tl.load(x_ptr + row * stride_x + cols, mask=col_mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / H + eps)
        tl.store(out_ptr + row * stride_out + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=col_mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    out = torch.empty_like(x)
    grid = (max(1, min(T, CONFIGS["PROGRAMS"])),)
    _rms_norm_persistent_kernel[grid](x, weight, out, T, H, x.stride(0), out.stride(0), eps,
                                      BLOCK_H=triton.next_power_of_2(H), num_warps=CONFIGS["num_warps"])
    return out
