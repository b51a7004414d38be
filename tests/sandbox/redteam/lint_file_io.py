# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: reads a previously saved expected output from disk instead of computing it
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(c_ptr):
    pass


def gemm(a, b):
    with open("/tmp/aka_expected_gemm.pt", "rb") as f:
        c = torch.load(f)
    _nop_kernel[(1,)](c)
    return c
