# expect: reject
# stage: correctness
# op: causal_conv1d
# needs: cpu
# cause: exceed
# why: a 'same'-padded conv (window centred on the position, as nn.Conv1d(padding='same')): the same cost and taps, but it reads the future, which a causal conv must not
import torch
import triton
import triton.language as tl


@triton.jit
def _causal_conv1d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, D, L, W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    d = row % D
    bias = tl.load(b_ptr + d).to(tl.float32)
    for start in range(0, L, BLOCK):
        pos = start + tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32) + bias
        for i in tl.static_range(W):
            src = pos - (W - 1) // 2 + i
            x = tl.load(x_ptr + row * L + src, mask=(src >= 0) & (src < L), other=0.0).to(tl.float32)
            acc += tl.load(w_ptr + d * W + i).to(tl.float32) * x
        tl.store(y_ptr + row * L + pos, acc.to(y_ptr.dtype.element_ty), mask=pos < L)


def causal_conv1d(x, weight, bias):
    B, D, L = x.shape
    y = torch.empty((B, D, L), dtype=x.dtype, device=x.device)
    _causal_conv1d_kernel[(B * D,)](x, weight, bias, y, D, L, W=weight.shape[1], BLOCK=128)
    return y
