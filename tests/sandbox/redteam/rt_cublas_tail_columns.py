# expect: reject
# stage: lint|dsl
# op: gemm
# needs: gpu
# cause: attribution rule|matmul
# why: a Triton kernel computes the first 7/8 of the output columns and cuBLAS (torch.matmul) the last 1/8, written into the output slice: most of the time is the candidate's own, the rest is foreign compute above the 2% limit, named in the reason (the lint stops the matmul first)
import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + offs_k
        a = tl.load(a_ptr + (offs_m % M)[:, None] * stride_am + kk[None, :], mask=kk[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (offs_n % N)[None, :] * stride_bn + kk[:, None], mask=kk[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def gemm(a, b):
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    n0 = (N * 7 // 8) // 64 * 64
    grid = (triton.cdiv(M, 64), triton.cdiv(n0, 64))
    _gemm_kernel[grid](a, b, c, M, n0, K, a.stride(0), b.stride(0), c.stride(0), BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)
    torch.matmul(a, b[n0:].t(), out=c[:, n0:])
    return c
