"""Seed causal_conv1d_update: one new token per sequence against its conv state [B, D, W-1] (oldest first).

out[b, d] = bias[d] + sum_{i < W-1} weight[d, i] * state[b, d, i] + weight[d, W-1] * x[b, d] (silu after
when SILU), and the state shifts left by one with x written last. Each program owns BLOCK_D channels of
one sequence as a [BLOCK_D, next_pow2(W)] window tile: the W - 1 state taps and x in the last column. Every
load (state, x, weight, bias) is issued before the first store: the new state is the window stored one
column to the left, so no value is overwritten before it is read and no load waits behind a store. (The
earlier seed walked the taps, storing tap i - 1 before loading tap i + 1: in-order issue made each tap's
load wait for the previous tap's DRAM round trip, three in a row.) One launch, no host synchronization.
"""
import torch
import triton
import triton.language as tl

# By batch B: the first bucket whose bound is >= B. Small batches take narrower channel tiles so that
# B=1 still launches D / BLOCK_D = 32 programs. TAPS_1D=1 (W = 4 only; a structural switch): the taps as three
# 1-D loads in one layout instead of the [BLOCK_D, next_pow2(W)] window tile, which needs layout conversions
# and a row sum; Nsight Compute read the tile kernel SM-bound at B = 256 (58% SM throughput, DRAM 18%).
CONFIGS = {
    "buckets": [
        # B <= 16: the 1-D taps (variant `taps_1d`), 2.18 us at B = 16 against the tile's 2.31; at B = 64 and
        # 256 the tile was faster (3.80 / 9.51 against 4.12 / 10.03) (2026-12-03, new_ops_h200.md)
        (16, dict(BLOCK_D=128, num_warps=4, TAPS_1D=1)),
        (64, dict(BLOCK_D=256, num_warps=4, TAPS_1D=0)),
        # B = 256: 256 channels a program, 4 warps (variant `b256_w4_large`), 9.57 us on the H200 against 10.12
        # with 512 and 8 warps, the choice for the tap-by-tap kernel before (2026-12-03, new_ops_h200.md)
        (1 << 62, dict(BLOCK_D=256, num_warps=4, TAPS_1D=0)),
    ],
}


@triton.jit
def _causal_conv1d_update_kernel(x_ptr, state_ptr, w_ptr, b_ptr, y_ptr, D, stride_xb, stride_xd, stride_sb,
                                 stride_sd, stride_si, stride_wd, stride_wi, stride_yb,
                                 W: tl.constexpr, SILU: tl.constexpr, BLOCK_D: tl.constexpr,
                                 BLOCK_W: tl.constexpr):
    seq = tl.program_id(0).to(tl.int64)
    ch = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = ch < D
    tap = tl.arange(0, BLOCK_W)
    state_taps = state_ptr + seq * stride_sb + ch.to(tl.int64)[:, None] * stride_sd + tap[None, :] * stride_si
    in_state = mask[:, None] & (tap < W - 1)[None, :]
    s = tl.load(state_taps, mask=in_state, other=0.0)
    x = tl.load(x_ptr + seq * stride_xb + ch * stride_xd, mask=mask, other=0.0)
    w = tl.load(w_ptr + ch[:, None] * stride_wd + tap[None, :] * stride_wi,
                mask=mask[:, None] & (tap < W)[None, :], other=0.0).to(tl.float32)
    acc = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    # the window in the state's dtype: its last column is x (a copy, so the shifted state stays exact)
    window = tl.where((tap == W - 1)[None, :], x.to(state_ptr.dtype.element_ty)[:, None], s)
    acc += tl.sum(w * tl.where((tap == W - 1)[None, :], x.to(tl.float32)[:, None], s.to(tl.float32)), axis=1)
    # window column i (1 <= i < W) becomes state tap i - 1
    tl.store(state_taps - stride_si, window, mask=mask[:, None] & (tap >= 1)[None, :] & (tap < W)[None, :])
    if SILU:
        # exp(-v) overflows fp32 below v = -88; clamped, silu there is still ~1e-25 (zero within any tolerance)
        acc = acc / (1.0 + tl.exp(-tl.maximum(acc, -80.0)))
    tl.store(y_ptr + seq * stride_yb + ch, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _causal_conv1d_update_w4_kernel(x_ptr, state_ptr, w_ptr, b_ptr, y_ptr, D, stride_xb, stride_xd, stride_sb,
                                    stride_sd, stride_si, stride_wd, stride_wi, stride_yb,
                                    SILU: tl.constexpr, BLOCK_D: tl.constexpr):
    """W = 4: the three state taps, x, the four weights and the bias as 1-D loads of one layout, all issued before
    the first store (the new state is taps 1, 2 and x written one place to the left)."""
    seq = tl.program_id(0).to(tl.int64)
    ch = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = ch < D
    row = (state_ptr + seq * stride_sb) + ch * stride_sd
    w_row = w_ptr + ch * stride_wd
    s0 = tl.load(row, mask=mask, other=0.0)
    s1 = tl.load(row + stride_si, mask=mask, other=0.0)
    s2 = tl.load(row + 2 * stride_si, mask=mask, other=0.0)
    x = tl.load(x_ptr + seq * stride_xb + ch * stride_xd, mask=mask, other=0.0)
    w0 = tl.load(w_row, mask=mask, other=0.0).to(tl.float32)
    w1 = tl.load(w_row + stride_wi, mask=mask, other=0.0).to(tl.float32)
    w2 = tl.load(w_row + 2 * stride_wi, mask=mask, other=0.0).to(tl.float32)
    w3 = tl.load(w_row + 3 * stride_wi, mask=mask, other=0.0).to(tl.float32)
    acc = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    acc += w0 * s0.to(tl.float32) + w1 * s1.to(tl.float32) + w2 * s2.to(tl.float32) + w3 * x.to(tl.float32)
    tl.store(row, s1, mask=mask)
    tl.store(row + stride_si, s2, mask=mask)
    tl.store(row + 2 * stride_si, x.to(state_ptr.dtype.element_ty), mask=mask)
    if SILU:
        acc = acc / (1.0 + tl.exp(-tl.maximum(acc, -80.0)))
    tl.store(y_ptr + seq * stride_yb + ch, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _pick_config(B: int) -> dict:
    for bound, cfg in CONFIGS["buckets"]:
        if B <= bound:
            return cfg
    return CONFIGS["buckets"][-1][1]


def causal_conv1d_update(x, conv_state, weight, bias, silu=True):
    if x.dim() != 2 or weight.dim() != 2 or conv_state.shape != (x.shape[0], x.shape[1], weight.shape[1] - 1) \
            or weight.shape[0] != x.shape[1] or bias.shape != (x.shape[1],):
        raise ValueError(f"causal_conv1d_update expects x[B,D], conv_state[B,D,W-1], weight[D,W], bias[D]; got "
                         f"x {tuple(x.shape)}, conv_state {tuple(conv_state.shape)}, weight {tuple(weight.shape)}, "
                         f"bias {tuple(bias.shape)}")
    B, D = x.shape
    W = weight.shape[1]
    y = torch.empty((B, D), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    cfg = _pick_config(B)
    grid = (B, triton.cdiv(D, cfg["BLOCK_D"]))
    strides = (x.stride(0), x.stride(1), conv_state.stride(0), conv_state.stride(1), conv_state.stride(2),
               weight.stride(0), weight.stride(1), y.stride(0))
    if W == 4 and cfg.get("TAPS_1D", 0):
        _causal_conv1d_update_w4_kernel[grid](x, conv_state, weight, bias, y, D, *strides, SILU=bool(silu),
                                              BLOCK_D=cfg["BLOCK_D"], num_warps=cfg["num_warps"])
    else:
        _causal_conv1d_update_kernel[grid](x, conv_state, weight, bias, y, D, *strides, W=W, SILU=bool(silu),
                                           BLOCK_D=cfg["BLOCK_D"], BLOCK_W=triton.next_power_of_2(W),
                                           num_warps=cfg["num_warps"])
    return y
