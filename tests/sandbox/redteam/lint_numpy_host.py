# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: computes on the host with numpy and copies the result back
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def silu_and_mul(x):
    I = x.shape[1] // 2
    _nop_kernel[(1,)](x)
    return x
