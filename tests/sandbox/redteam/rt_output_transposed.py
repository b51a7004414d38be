# expect: reject
# stage: correctness
# op: rms_norm
# needs: cpu
# cause: output layout rule
# why: writes the result column-major into an [H, T] buffer and returns its transpose: the values and shape are right, but the strides are (1, T), so the reference's consumer would have to copy it
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, T, H, stride_x, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + cols * T + row, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    buf = torch.empty((H, T), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(T,)](x, weight, buf, T, H, x.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return buf.t()
