# expect: reject
# stage: correctness
# op: rms_norm
# needs: cpu
# cause: input-write rule
# why: uses the input x as scratch inside its one kernel (stores x*x over x, reads it back for the sum of squares) and restores x before the kernel ends: the digests after the call match, but another stream reading x meanwhile would see garbage; the call on read-only copies of x faults
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    ptrs = x_ptr + row * stride_x + cols
    x_raw = tl.load(ptrs, mask=mask, other=0.0)
    x = x_raw.to(tl.float32)
    tl.store(ptrs, (x * x).to(x_ptr.dtype.element_ty), mask=mask)       # scratch in the caller's input
    sq = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(ptrs, x_raw, mask=mask)                                     # ... restored before returning
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / H + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(T,)](x, weight, y, H, x.stride(0), y.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return y
