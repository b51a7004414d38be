# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: torch.nn.functional computes the result beside a kernel that only allocates
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _noop_kernel(out_ptr):
    pass


def silu_and_mul(x):
    I = x.shape[-1] // 2
    out = torch.empty((x.shape[0], I), device=x.device, dtype=x.dtype)
    _noop_kernel[(1,)](out)
    return F.silu(x[:, :I]) * x[:, I:]
