# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: calls os._exit(0) so the checking process ends with status 0 before a verdict is written
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def rms_norm(x, weight, eps=1e-6):
    _nop_kernel[(1,)](x)
    os._exit(0)
