# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: hides torch behind a local alias so that torch.* calls do not appear literally
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def silu_and_mul(x):
    backend = torch
    I = x.shape[1] // 2
    _nop_kernel[(1,)](x)
    return backend.sigmoid(x[:, :I]) * x[:, :I] * x[:, I:]
