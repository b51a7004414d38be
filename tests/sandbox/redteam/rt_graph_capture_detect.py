# expect: reject
# stage: lint|timing
# op: rms_norm
# needs: gpu
# cause: timed-replay rule|is_current_stream_capturing|torch.cuda
# why: asks torch whether the stream is being captured and, inside the timing graph, launches one program instead of T: every eager call (the correctness trials) is right, the timed graph computes one row; the replay of the timed graph on fresh inputs catches it (the lint stops the torch.cuda call first)
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    programs = 1 if torch.cuda.is_current_stream_capturing() else T
    _rms_norm_kernel[(programs,)](x, weight, y, H, x.stride(0), y.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return y
