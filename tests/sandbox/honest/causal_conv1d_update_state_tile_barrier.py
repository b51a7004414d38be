# expect: accept
# op: causal_conv1d_update
# needs: cpu
# why: flattened (sequence, channel) rows in 2-D tiles: the whole W-wide window (state taps, then x) loaded as one tile, a reduction for the output, a barrier, then the tile stored back one column to the left
import torch
import triton
import triton.language as tl


@triton.jit
def _causal_conv1d_update_rows_kernel(x_ptr, state_ptr, w_ptr, b_ptr, y_ptr, rows, D, W: tl.constexpr,
                                      WP: tl.constexpr, SILU: tl.constexpr, ROWS: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = r < rows
    d = r % D
    col = tl.arange(0, WP)
    in_state = live[:, None] & (col[None, :] < W - 1)
    s_ptrs = state_ptr + r[:, None] * (W - 1) + col[None, :]
    win = tl.load(s_ptrs, mask=in_state, other=0.0)
    xv = tl.load(x_ptr + r, mask=live, other=0.0)
    win = tl.where(col[None, :] == W - 1, xv[:, None], win)
    w = tl.load(w_ptr + d[:, None] * W + col[None, :], mask=live[:, None] & (col[None, :] < W), other=0.0)
    acc = tl.sum(win.to(tl.float32) * w.to(tl.float32), 1) + tl.load(b_ptr + d, mask=live, other=0.0).to(tl.float32)
    if SILU:
        acc = acc * tl.sigmoid(acc)
    tl.store(y_ptr + r, acc.to(y_ptr.dtype.element_ty), mask=live)
    # every lane's load of the tile is done before any lane overwrites a neighbour's column
    tl.debug_barrier()
    tl.store(s_ptrs - 1, win, mask=live[:, None] & (col[None, :] >= 1) & (col[None, :] < W))


def causal_conv1d_update(x, conv_state, weight, bias, silu=True):
    B, D = x.shape
    W = weight.shape[1]
    y = torch.empty((B, D), dtype=x.dtype, device=x.device)
    rows_per_program = 64
    _causal_conv1d_update_rows_kernel[(triton.cdiv(B * D, rows_per_program),)](
        x, conv_state, weight, bias, y, B * D, D, W=W, WP=triton.next_power_of_2(W), SILU=silu,
        ROWS=rows_per_program)
    return y
