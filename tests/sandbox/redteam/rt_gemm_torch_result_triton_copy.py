# expect: reject
# stage: lint|dsl
# op: gemm
# needs: gpu
# cause: attribution rule|multiplies matrices
# why: cuBLAS computes the product and a Triton kernel copies it into the output, so a Triton kernel runs on every call; almost all compute time is foreign, and attribution on the first shape rejects it before any correctness trial runs (the lint stops the matmul first)
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def gemm(a, b):
    M, N = a.shape[0], b.shape[0]
    product = a @ b.t()
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    _copy_kernel[(triton.cdiv(M * N, 1024),)](product, c, M * N, BLOCK=1024)
    return c
