# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: reaches the reference through __import__ and a computed module name
import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def rms_norm(x, weight, eps=1e-6):
    name = ".".join(["benchmarks", "operators", "rms_norm", "operator"])
    mod = __import__(name, fromlist=["reference"])
    _nop_kernel[(1,)](x)
    return mod.reference(x=x, weight=weight, eps=eps)
