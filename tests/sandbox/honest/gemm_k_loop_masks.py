# expect: accept
# op: gemm
# needs: cpu
# why: 2D grid, one output tile per program, K loop with masks on every edge; b[N,K] read transposed
import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_tile_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a_tile = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :],
                         mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0).to(tl.float32)
        bt_tile = tl.load(b_ptr + rn[None, :] * stride_bn + kk[:, None],
                          mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0).to(tl.float32)
        acc = tl.dot(a_tile, bt_tile, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def gemm(a, b):
    assert a.shape[1] == b.shape[1], f"K mismatch: a is {tuple(a.shape)}, b is {tuple(b.shape)}"
    a = a.contiguous()
    b = b.contiguous()
    M, K = a.shape
    N, _ = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    block_m, block_n, block_k = 32, 32, 32
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _gemm_tile_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4)
    return c
