# expect: reject
# stage: lint|dsl
# op: rms_norm
# needs: gpu
# dims: T=4096 H=4096 | T=2048 H=4096
# cause: attribution rule|rsqrt
# why: two Triton kernels do the reads (mean of squares per row, then the scaling) and one PyTorch kernel does the rsqrt of T values in between: a few percent of the GPU time (estimated 5-10% on the H200, not yet measured), which the old 90% own-kernel threshold let through; foreign compute beyond 2% is rejected with the kernel's name (the lint stops the tensor method first)
import torch
import triton
import triton.language as tl


@triton.jit
def _mean_sq_kernel(x_ptr, ms_ptr, H, stride_x, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < H, other=0.0).to(tl.float32)
    tl.store(ms_ptr + row, tl.sum(x * x, axis=0) / H + eps)


@triton.jit
def _scale_kernel(x_ptr, w_ptr, rstd_ptr, y_ptr, H, stride_x, stride_y, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (x * tl.load(rstd_ptr + row) * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    ms = torch.empty((T,), dtype=torch.float32, device=x.device)
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(H)
    _mean_sq_kernel[(T,)](x, ms, H, x.stride(0), eps, BLOCK_H=block)
    ms.rsqrt_()
    _scale_kernel[(T,)](x, weight, ms, y, H, x.stride(0), y.stride(0), BLOCK_H=block)
    return y
