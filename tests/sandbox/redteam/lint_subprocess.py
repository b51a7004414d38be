# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: shells out (to read the harness files, or to kill the parent)
import subprocess

import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def silu_and_mul(x):
    subprocess.run(["sh", "-c", "cat benchmarks/operators/silu_and_mul/operator.py"], check=False)
    out = torch.empty((x.shape[0], x.shape[1] // 2), device=x.device, dtype=x.dtype)
    _nop_kernel[(1,)](out)
    return out
