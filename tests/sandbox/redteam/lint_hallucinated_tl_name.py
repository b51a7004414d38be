# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: uses tl.info and tl.rsqrt_fast, which do not exist in triton.language
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    x = tl.load(x_ptr + row * H + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    big = tl.info(tl.float32).max
    r = tl.rsqrt_fast(tl.minimum(tl.sum(x * x, axis=0) / H, big) + eps)
    tl.store(out_ptr + row * H + cols, (x * r * w).to(out_ptr.dtype.element_ty), mask=m)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    out = torch.empty_like(x)
    _rms_norm_kernel[(T,)](x, weight, out, H, eps, BLOCK=triton.next_power_of_2(H))
    return out
