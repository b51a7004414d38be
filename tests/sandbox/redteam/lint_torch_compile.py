# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: lets torch.compile (Inductor) write the kernel instead of the candidate
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def _reference_like(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


_compiled = torch.compile(_reference_like)


def rms_norm(x, weight, eps=1e-6):
    _nop_kernel[(1,)](x)
    return _compiled(x, weight, eps)
