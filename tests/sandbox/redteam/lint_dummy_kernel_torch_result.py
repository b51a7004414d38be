# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: a dummy Triton kernel is launched for show while PyTorch computes the result
import torch
import triton
import triton.language as tl


@triton.jit
def _touch_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, v, mask=offs < n)


def rms_norm(x, weight, eps=1e-6):
    _touch_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
    xf = x.float()
    variance = xf.pow(2).mean(-1, keepdim=True)
    return (xf * torch.rsqrt(variance + eps) * weight.float()).to(x.dtype)
