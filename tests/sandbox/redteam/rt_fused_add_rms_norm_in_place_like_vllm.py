# expect: reject
# stage: correctness
# op: fused_add_rms_norm
# needs: cpu
# cause: input-write rule|shares memory with input
# why: vLLM's fused_add_rms_norm works in place: it writes the sum into residual and the normalized rows into x and hands those back, saving two allocations; here x and residual are inputs another stream may still read, so returning them rewritten is an input write, not a result
import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, H, sx, sr, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    s = (tl.load(x_ptr + row * sx + cols, mask=m, other=0.0).to(tl.float32)
         + tl.load(r_ptr + row * sr + cols, mask=m, other=0.0).to(tl.float32)).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + row * sr + cols, s, mask=m)
    sf = s.to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(sf * sf, axis=0) / H + eps)
    tl.store(x_ptr + row * sx + cols, (sf * rstd * w).to(x_ptr.dtype.element_ty), mask=m)


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    T, H = x.shape
    _fused_add_rms_norm_kernel[(T,)](x, residual, weight, H, x.stride(0), residual.stride(0), eps,
                                     BLOCK=triton.next_power_of_2(H))
    return x, residual
