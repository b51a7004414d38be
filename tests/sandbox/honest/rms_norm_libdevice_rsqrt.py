# expect: accept
# op: rms_norm
# needs: gpu
# why: takes the reciprocal square root from triton.language.extra.libdevice (CUDA's __nv_rsqrtf); accepted on a GPU. Triton's CPU interpreter does not implement libdevice, so on the CPU the verdict is rejected with interpreter_limitation set (tests/sandbox/test_runtime_gates.py), not a candidate fault
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = libdevice.rsqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(T,)](x, weight, y, H, x.stride(0), y.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return y
