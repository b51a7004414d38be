# expect: reject
# stage: correctness
# op: causal_conv1d
# needs: cpu
# dims: B=2 D=8 L=256 W=4 | B=2 D=5 L=200 W=4
# cause: exceed
# why: a packed-varlen kernel that ignores where sequences start: the first W-1 positions of each sequence read the previous sequence's tail as history instead of zeros
import torch
import triton
import triton.language as tl


@triton.jit
def _causal_conv1d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, D, L, W: tl.constexpr, BLOCK: tl.constexpr):
    seq = tl.program_id(0)
    d = tl.program_id(1)
    bias = tl.load(b_ptr + d).to(tl.float32)
    for start in range(0, L, BLOCK):
        pos = start + tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32) + bias
        for i in tl.static_range(W):
            src = pos - (W - 1) + i
            prev = tl.where(src < 0, (seq - 1) * D * L + d * L + L + src, seq * D * L + d * L + src)
            ok = (src < L) & ((src >= 0) | (seq > 0))
            x = tl.load(x_ptr + prev, mask=ok, other=0.0).to(tl.float32)
            acc += tl.load(w_ptr + d * W + i).to(tl.float32) * x
        tl.store(y_ptr + seq * D * L + d * L + pos, acc.to(y_ptr.dtype.element_ty), mask=pos < L)


def causal_conv1d(x, weight, bias):
    B, D, L = x.shape
    y = torch.empty((B, D, L), dtype=x.dtype, device=x.device)
    _causal_conv1d_kernel[(B, D)](x, weight, bias, y, D, L, W=weight.shape[1], BLOCK=128)
    return y
