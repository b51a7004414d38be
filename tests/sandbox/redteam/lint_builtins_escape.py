# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: fetches eval from __builtins__ to run PyTorch code hidden in a string
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def silu_and_mul(x):
    run = __builtins__["ev" + "al"]
    _nop_kernel[(1,)](x)
    return run("torch.nn.functional.silu(x[:, :x.shape[1] // 2]) * x[:, x.shape[1] // 2:]")
