# expect: reject
# stage: correctness
# op: causal_conv1d_update
# needs: cpu
# cause: conv_state
# why: the output is right, but the state is not shifted: only the newest slot is overwritten with x (one store instead of W - 1), so the next step convolves a stale history
import torch
import triton
import triton.language as tl


@triton.jit
def _causal_conv1d_update_row_kernel(x_ptr, state_ptr, w_ptr, b_ptr, y_ptr, B, D, W: tl.constexpr,
                                     SILU: tl.constexpr, BLOCK_D: tl.constexpr):
    seq = tl.program_id(0)
    ch = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    m = ch < D
    row = state_ptr + (seq * D + ch) * (W - 1)
    x = tl.load(x_ptr + seq * D + ch, mask=m, other=0.0)
    acc = tl.load(b_ptr + ch, mask=m, other=0.0).to(tl.float32)
    acc += tl.load(w_ptr + ch * W + W - 1, mask=m, other=0.0).to(tl.float32) * x.to(tl.float32)
    for i in tl.static_range(W - 1):
        s = tl.load(row + i, mask=m, other=0.0)
        acc += tl.load(w_ptr + ch * W + i, mask=m, other=0.0).to(tl.float32) * s.to(tl.float32)
    tl.store(row + W - 2, x, mask=m)
    if SILU:
        acc = acc * tl.sigmoid(acc)
    tl.store(y_ptr + seq * D + ch, acc.to(y_ptr.dtype.element_ty), mask=m)


def causal_conv1d_update(x, conv_state, weight, bias, silu=True):
    B, D = x.shape
    y = torch.empty((B, D), dtype=x.dtype, device=x.device)
    _causal_conv1d_update_row_kernel[(B, triton.cdiv(D, 128))](x, conv_state, weight, bias, y, B, D,
                                                                W=weight.shape[1], SILU=silu, BLOCK_D=128)
    return y
