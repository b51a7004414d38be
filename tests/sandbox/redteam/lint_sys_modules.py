# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: digs the harness's modules out of sys.modules to read the reference outputs
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(c_ptr):
    pass


def gemm(a, b):
    for name, mod in list(sys.modules.items()):
        if name.startswith("sandbox") and hasattr(mod, "expected"):
            _nop_kernel[(1,)](a)
            return mod.expected
    return a
