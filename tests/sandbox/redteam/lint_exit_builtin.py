# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: exits the interpreter (exit / quit) hoping a clean exit status reads as success
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def silu_and_mul(x):
    _nop_kernel[(1,)](x)
    quit()
