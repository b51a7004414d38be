# expect: reject
# stage: correctness
# op: moe_sum_reduce
# needs: cpu
# cause: exceed
# why: sums the k expert rows without the router weights (vLLM's moe_sum, whose GEMM already applied them), skipping the weights' load: a different function here
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_sum_reduce_kernel(x_ptr, y_ptr, K, H, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(K):
        acc += tl.load(x_ptr + (t * K + j) * H + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + t * H + cols, acc.to(y_ptr.dtype.element_ty), mask=mask)


def moe_sum_reduce(x, weights):
    T, K, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _moe_sum_reduce_kernel[(T,)](x, y, K, H, BLOCK=triton.next_power_of_2(H))
    return y
