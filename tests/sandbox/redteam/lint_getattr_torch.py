# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: reaches torch.matmul through getattr with a computed name
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(c_ptr):
    pass


def gemm(a, b):
    fn = getattr(torch, "mat" + "mul")
    c = fn(a, b.t())
    _nop_kernel[(1,)](c)
    return c
