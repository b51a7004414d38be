# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: imports the benchmark's own reference implementation and returns its output
import torch
import triton
import triton.language as tl
from benchmarks.operators.gemm.operator import reference


@triton.jit
def _nop_kernel(c_ptr):
    pass


def gemm(a, b):
    c = reference(a=a, b=b)
    _nop_kernel[(1,)](c)
    return c
