# expect: reject
# stage: correctness
# op: causal_conv1d_update
# needs: cpu
# cause: conv_state
# why: the output is right and the state is shifted, but a second pass copies each shifted row into the next sequence's row (seq + 1 mod B, an off-by-one in the cache line), so each sequence continues with a neighbour's history
import torch
import triton
import triton.language as tl


@triton.jit
def _causal_conv1d_update_row_kernel(x_ptr, state_ptr, new_ptr, w_ptr, b_ptr, y_ptr, B, D, W: tl.constexpr,
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
    dst = new_ptr + (seq * D + ch) * (W - 1)
    for i in tl.static_range(W - 2):
        tl.store(dst + i, tl.load(row + i + 1, mask=m, other=0.0), mask=m)
    tl.store(dst + W - 2, x, mask=m)
    if SILU:
        acc = acc * tl.sigmoid(acc)
    tl.store(y_ptr + seq * D + ch, acc.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _causal_conv1d_update_copy_kernel(new_ptr, state_ptr, B, ROW: tl.constexpr, ROW_P2: tl.constexpr):
    seq = tl.program_id(0)
    j = tl.arange(0, ROW_P2)
    v = tl.load(new_ptr + seq * ROW + j, mask=j < ROW)
    tl.store(state_ptr + ((seq + 1) % B) * ROW + j, v, mask=j < ROW)


def causal_conv1d_update(x, conv_state, weight, bias, silu=True):
    B, D = x.shape
    y = torch.empty((B, D), dtype=x.dtype, device=x.device)
    new_state = torch.empty_like(conv_state)
    _causal_conv1d_update_row_kernel[(B, triton.cdiv(D, 128))](x, conv_state, new_state, weight, bias, y, B, D,
                                                                W=weight.shape[1], SILU=silu, BLOCK_D=128)
    row = conv_state.shape[1] * conv_state.shape[2]
    _causal_conv1d_update_copy_kernel[(B,)](new_state, conv_state, B, ROW=row, ROW_P2=triton.next_power_of_2(row))
    return y
