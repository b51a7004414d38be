# expect: reject
# stage: correctness
# op: moe_sum_reduce
# needs: cpu
# dims: T=4 k=8 H=256 | T=3 k=8 H=192
# cause: hold-out
# why: unrolls the expert loop for k=8, the top-k of every hot shape, instead of reading k from the input: hold-out shapes with another k sum the wrong rows
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_sum_reduce_kernel(x_ptr, w_ptr, y_ptr, H, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in tl.static_range(8):
        w = tl.load(w_ptr + t * 8 + j)
        acc += w * tl.load(x_ptr + (t * 8 + j) * H + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + t * H + cols, acc.to(y_ptr.dtype.element_ty), mask=mask)


def moe_sum_reduce(x, weights):
    T, K, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _moe_sum_reduce_kernel[(T,)](x, weights, y, H, BLOCK=triton.next_power_of_2(H))
    return y
