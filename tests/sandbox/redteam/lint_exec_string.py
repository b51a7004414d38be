# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: exec runs PyTorch code kept in a string where the lint cannot read it
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(c_ptr):
    pass


def gemm(a, b):
    scope = {"a": a, "b": b}
    exec("c = a.float().mm(b.float().t()).to(a.dtype)", scope)
    _nop_kernel[(1,)](scope["c"])
    return scope["c"]
