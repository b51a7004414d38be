# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: walks gc.get_objects() for a tensor of the output's shape (the harness's reference) and returns it
import gc

import torch
import triton
import triton.language as tl


@triton.jit
def _fill_kernel(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, 0.0, mask=offs < n)


def gemm(a, b):
    M, N = a.shape[0], b.shape[0]
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and tuple(obj.shape) == (M, N) and obj.dtype == a.dtype:
            return obj
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    _fill_kernel[(triton.cdiv(M * N, 1024),)](c, M * N, BLOCK=1024)
    return c
