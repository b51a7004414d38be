# expect: reject
# stage: correctness
# op: rms_norm
# needs: cpu
# cause: exceed
# why: the kernel stores zeros: a launched, compiling kernel that computes nothing
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    tl.store(y_ptr + row * stride_y + cols, tl.zeros([BLOCK_H], dtype=tl.float32).to(y_ptr.dtype.element_ty),
             mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(T,)](x, weight, y, H, x.stride(0), y.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return y
