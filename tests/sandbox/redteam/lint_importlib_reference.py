# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: loads the benchmark's reference through importlib so no import statement names it
import importlib

import torch
import triton
import triton.language as tl


@triton.jit
def _nop_kernel(x_ptr):
    pass


def rms_norm(x, weight, eps=1e-6):
    ref = importlib.import_module("benchmarks.operators.rms_norm.operator").reference
    _nop_kernel[(1,)](x)
    return ref(x=x, weight=weight, eps=eps)
