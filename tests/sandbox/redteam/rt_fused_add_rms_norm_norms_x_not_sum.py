# expect: reject
# stage: correctness
# op: fused_add_rms_norm
# needs: cpu
# cause: output out:
# why: writes residual_out = x + residual right, but normalizes x (the block's output) instead of the new residual stream: the same reads and writes, a plain rms_norm glued to an add; out is wrong while the second output passes
import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, o_ptr, ro_ptr, H, sx, sr, so, sro, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    x = tl.load(x_ptr + row * sx + cols, mask=m, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * sr + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(ro_ptr + row * sro + cols, (x + r).to(ro_ptr.dtype.element_ty), mask=m)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(o_ptr + row * so + cols, (x * rstd * w).to(o_ptr.dtype.element_ty), mask=m)


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    T, H = x.shape
    out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    residual_out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _fused_add_rms_norm_kernel[(T,)](x, residual, weight, out, residual_out, H, x.stride(0), residual.stride(0),
                                     out.stride(0), residual_out.stride(0), eps, BLOCK=triton.next_power_of_2(H))
    return out, residual_out
