"""Seed causal_conv1d_update: one new token per sequence against its conv state [B, D, W-1] (oldest first).

out[b, d] = bias[d] + sum_{i < W-1} weight[d, i] * state[b, d, i] + weight[d, W-1] * x[b, d] (silu after
when SILU), and the state shifts left by one with x written last. Each program owns BLOCK_D channels of
one sequence and walks the W - 1 taps: it loads tap i, adds it to the sum and writes it back one place
to the left; tap i - 1 was loaded by the same lanes one step earlier, so the in-place shift never
overwrites a value before it is read. One launch, no host synchronization.
"""
import torch
import triton
import triton.language as tl

# By batch B: the first bucket whose bound is >= B. Small batches take narrower channel tiles so that
# B=1 still launches D / BLOCK_D = 32 programs.
CONFIGS = {
    "buckets": [
        (16, dict(BLOCK_D=128, num_warps=4)),
        (64, dict(BLOCK_D=256, num_warps=4)),
        # 8 warps: B = 256 read 10.1 us against 11.5 with 4 on the H200 (2026-12-02 session 9, new_ops_h200.md)
        (1 << 62, dict(BLOCK_D=512, num_warps=8)),
    ],
}


@triton.jit
def _causal_conv1d_update_kernel(x_ptr, state_ptr, w_ptr, b_ptr, y_ptr, D, stride_xb, stride_xd, stride_sb,
                                 stride_sd, stride_si, stride_wd, stride_wi, stride_yb,
                                 W: tl.constexpr, SILU: tl.constexpr, BLOCK_D: tl.constexpr):
    seq = tl.program_id(0).to(tl.int64)
    ch = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = ch < D
    row = state_ptr + seq * stride_sb + ch.to(tl.int64) * stride_sd
    acc = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    for i in tl.static_range(W - 1):
        s = tl.load(row + i * stride_si, mask=mask, other=0.0)
        acc += tl.load(w_ptr + ch * stride_wd + i * stride_wi, mask=mask, other=0.0).to(tl.float32) * s.to(tl.float32)
        if i > 0:
            tl.store(row + (i - 1) * stride_si, s, mask=mask)
    x = tl.load(x_ptr + seq * stride_xb + ch * stride_xd, mask=mask, other=0.0)
    acc += tl.load(w_ptr + ch * stride_wd + (W - 1) * stride_wi, mask=mask, other=0.0).to(tl.float32) * x.to(tl.float32)
    tl.store(row + (W - 2) * stride_si, x.to(state_ptr.dtype.element_ty), mask=mask)
    if SILU:
        # exp(-v) overflows fp32 below v = -88; clamped, silu there is still ~1e-25 (zero within any tolerance)
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
    _causal_conv1d_update_kernel[grid](x, conv_state, weight, bias, y, D, x.stride(0), x.stride(1),
                                       conv_state.stride(0), conv_state.stride(1), conv_state.stride(2),
                                       weight.stride(0), weight.stride(1), y.stride(0), W=W, SILU=bool(silu),
                                       BLOCK_D=cfg["BLOCK_D"], num_warps=cfg["num_warps"])
    return y
