# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: hides an output cache in a mutable default argument of a helper
import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + rm * K + k, mask=rm < M, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + rn * K + k, mask=rn < N, other=0.0).to(tl.float32)
        acc += a[:, None] * b[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _launch(a, b, memo={}):
    key = (tuple(a.shape), tuple(b.shape))
    if key not in memo:
        M, K = a.shape
        N = b.shape[0]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        _gemm_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, c, M, N, K, BLOCK=16)
        memo[key] = c
    return memo[key]


def gemm(a, b):
    return _launch(a, b)
