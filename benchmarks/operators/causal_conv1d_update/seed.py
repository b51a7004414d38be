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

# By batch B: the first bucket whose bound is >= B. PACKED=1 (W = 4, one 2-byte dtype, contiguous, D % 4 == 0,
# else the kernels below it): four channels a lane as 64-bit words (_causal_conv1d_update_packed_kernel), BLOCK_D
# channels a program, BLOCK_D / 4 lanes. PACKED=0 keeps the element-wise kernels, which every other call takes:
# TAPS_1D=1 (W = 4 only) the taps as three 1-D loads in one layout, TAPS_1D=0 the [BLOCK_D, next_pow2(W)] window
# tile. Nsight Compute read the tile kernel SM-bound at B = 256 (58% SM throughput, DRAM 18%): 2-byte accesses,
# three loads and three stores a channel, are its limit, which is what PACKED removes.
# The element-wise settings, timed on the H200 (2026-12-03, new_ops_h200.md): B <= 16 TAPS_1D with 128 channels
# (2.18 us at B = 16 against the tile's 2.31); B = 64 and 256 the tile with 256 channels on 4 warps (3.80 / 9.51
# against TAPS_1D's 4.12 / 10.03, and 10.12 with 512 channels on 8 warps at B = 256).
CONFIGS = {
    "buckets": [
        # PACKED at B = 16 / 64: 2.22 / 3.05 us against the element-wise kernels' 2.36 / 3.95; the other tiles and
        # warps timed within 5% of these (variants `elementwise`, `packed_*`; 2026-12-04, new_ops_h200.md)
        (16, dict(BLOCK_D=128, num_warps=4, TAPS_1D=1, PACKED=1, PACKED_BLOCK_D=256, packed_num_warps=2)),
        (64, dict(BLOCK_D=256, num_warps=4, TAPS_1D=0, PACKED=1, PACKED_BLOCK_D=512, packed_num_warps=4)),
        # one lane a thread at B = 256: 512 channels on 4 warps 7.29 us (7.16 as `packed_b512_w4_small`), 1024 on
        # 4 warps 10.76, 2048 on 8 9.86 (variants `packed_b1024_w4_large`, `packed_b2048_w8_large`, 2026-12-04)
        (1 << 62, dict(BLOCK_D=256, num_warps=4, TAPS_1D=0, PACKED=1, PACKED_BLOCK_D=512, packed_num_warps=4)),
    ],
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): each kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.98-1.00 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"PDL": [0, 1]}


@triton.jit
def _causal_conv1d_update_kernel(x_ptr, state_ptr, w_ptr, b_ptr, y_ptr, D, stride_xb, stride_xd, stride_sb,
                                 stride_sd, stride_si, stride_wd, stride_wi, stride_yb,
                                 W: tl.constexpr, SILU: tl.constexpr, BLOCK_D: tl.constexpr,
                                 BLOCK_W: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
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
                                    SILU: tl.constexpr, BLOCK_D: tl.constexpr, USE_PDL: tl.constexpr = False):
    """W = 4: the three state taps, x, the four weights and the bias as 1-D loads of one layout, all issued before
    the first store (the new state is taps 1, 2 and x written one place to the left)."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
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


@triton.jit
def _lane(word, i: tl.constexpr):
    """The i-th 16-bit element of a 64-bit word (little-endian: element i is bits 16i .. 16i + 15)."""
    return (word >> (16 * i)) & 0xFFFF


@triton.jit
def _f32(lane, DT: tl.constexpr):
    return lane.to(tl.uint16).to(DT, bitcast=True).to(tl.float32)


@triton.jit
def _pack4(a, b, c, d):
    return a | (b << 16) | (c << 32) | (d << 48)


@triton.jit
def _causal_conv1d_update_packed_kernel(x_ptr, state_ptr, w_ptr, b_ptr, y_ptr, D, SILU: tl.constexpr,
                                        BLOCK_G: tl.constexpr, USE_PDL: tl.constexpr = False):
    """W = 4, 2-byte dtypes, contiguous tensors, D % 4 == 0: four channels a lane as 64-bit words. Their
    twelve state elements are three words (e0..e11, channel m's taps e[3m..3m+2]), their x, bias and each
    channel's four weights one word each; the new state is three words made of the old elements shifted by
    one with x in every third place, so every access is a full 8-byte word (the tap-wise kernels move each
    2-byte element on its own: 3 loads and 3 stores a channel, which Nsight Compute read as SM-bound)."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    DT: tl.constexpr = state_ptr.dtype.element_ty
    seq = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1) * BLOCK_G + tl.arange(0, BLOCK_G)
    G = D // 4
    mask = g < G
    s_words = state_ptr.to(tl.pointer_type(tl.uint64)) + seq * (3 * G) + 3 * g
    w_words = w_ptr.to(tl.pointer_type(tl.uint64)) + 4 * g
    s0 = tl.load(s_words, mask=mask, other=0)
    s1 = tl.load(s_words + 1, mask=mask, other=0)
    s2 = tl.load(s_words + 2, mask=mask, other=0)
    xw = tl.load(x_ptr.to(tl.pointer_type(tl.uint64)) + seq * G + g, mask=mask, other=0)
    bw = tl.load(b_ptr.to(tl.pointer_type(tl.uint64)) + g, mask=mask, other=0)
    wt0 = tl.load(w_words, mask=mask, other=0)
    wt1 = tl.load(w_words + 1, mask=mask, other=0)
    wt2 = tl.load(w_words + 2, mask=mask, other=0)
    wt3 = tl.load(w_words + 3, mask=mask, other=0)
    e0, e1, e2, e3 = _lane(s0, 0), _lane(s0, 1), _lane(s0, 2), _lane(s0, 3)
    e4, e5, e6, e7 = _lane(s1, 0), _lane(s1, 1), _lane(s1, 2), _lane(s1, 3)
    e8, e9, e10, e11 = _lane(s2, 0), _lane(s2, 1), _lane(s2, 2), _lane(s2, 3)
    x0, x1, x2, x3 = _lane(xw, 0), _lane(xw, 1), _lane(xw, 2), _lane(xw, 3)
    # new[e] = old[e + 1], but x[m] at e = 3m + 2
    tl.store(s_words, _pack4(e1, e2, x0, e4), mask=mask)
    tl.store(s_words + 1, _pack4(e5, x1, e7, e8), mask=mask)
    tl.store(s_words + 2, _pack4(x2, e10, e11, x3), mask=mask)
    WT: tl.constexpr = w_ptr.dtype.element_ty
    y0 = (_f32(_lane(bw, 0), WT) + _f32(_lane(wt0, 0), WT) * _f32(e0, DT) + _f32(_lane(wt0, 1), WT) * _f32(e1, DT)
          + _f32(_lane(wt0, 2), WT) * _f32(e2, DT) + _f32(_lane(wt0, 3), WT) * _f32(x0, DT))
    y1 = (_f32(_lane(bw, 1), WT) + _f32(_lane(wt1, 0), WT) * _f32(e3, DT) + _f32(_lane(wt1, 1), WT) * _f32(e4, DT)
          + _f32(_lane(wt1, 2), WT) * _f32(e5, DT) + _f32(_lane(wt1, 3), WT) * _f32(x1, DT))
    y2 = (_f32(_lane(bw, 2), WT) + _f32(_lane(wt2, 0), WT) * _f32(e6, DT) + _f32(_lane(wt2, 1), WT) * _f32(e7, DT)
          + _f32(_lane(wt2, 2), WT) * _f32(e8, DT) + _f32(_lane(wt2, 3), WT) * _f32(x2, DT))
    y3 = (_f32(_lane(bw, 3), WT) + _f32(_lane(wt3, 0), WT) * _f32(e9, DT) + _f32(_lane(wt3, 1), WT) * _f32(e10, DT)
          + _f32(_lane(wt3, 2), WT) * _f32(e11, DT) + _f32(_lane(wt3, 3), WT) * _f32(x3, DT))
    if SILU:
        y0 = y0 / (1.0 + tl.exp(-tl.maximum(y0, -80.0)))
        y1 = y1 / (1.0 + tl.exp(-tl.maximum(y1, -80.0)))
        y2 = y2 / (1.0 + tl.exp(-tl.maximum(y2, -80.0)))
        y3 = y3 / (1.0 + tl.exp(-tl.maximum(y3, -80.0)))
    YT: tl.constexpr = y_ptr.dtype.element_ty
    tl.store(y_ptr.to(tl.pointer_type(tl.uint64)) + seq * G + g,
             _pack4(y0.to(YT).to(tl.uint16, bitcast=True).to(tl.uint64),
                    y1.to(YT).to(tl.uint16, bitcast=True).to(tl.uint64),
                    y2.to(YT).to(tl.uint16, bitcast=True).to(tl.uint64),
                    y3.to(YT).to(tl.uint16, bitcast=True).to(tl.uint64)), mask=mask)


def _packs(x, conv_state, weight, bias, y) -> bool:
    """Whether the 64-bit-word kernel applies: W = 4, one 2-byte dtype, contiguous, D % 4 == 0, 8-byte aligned
    (the storage offsets: the allocator aligns every storage to at least 256 bytes)."""
    ts = (x, conv_state, weight, bias, y)
    sizes = [t.element_size() for t in ts]
    contiguous = [t.is_contiguous() for t in ts]
    misaligned = [t.storage_offset() * t.element_size() % 8 for t in ts]
    return (weight.shape[1] == 4 and x.shape[1] % 4 == 0 and x.dtype == conv_state.dtype and sizes == [2] * 5
            and contiguous == [True] * 5 and misaligned == [0] * 5)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


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
    pdl = _pdl(x)
    if cfg.get("PACKED", 0) == 1 and _packs(x, conv_state, weight, bias, y) is True:
        lanes = cfg["PACKED_BLOCK_D"] // 4
        _causal_conv1d_update_packed_kernel[(B, triton.cdiv(D // 4, lanes))](
            x, conv_state, weight, bias, y, D, SILU=bool(silu), BLOCK_G=lanes, USE_PDL=pdl, launch_pdl=pdl,
            num_warps=cfg["packed_num_warps"])
    elif W == 4 and cfg.get("TAPS_1D", 0):
        _causal_conv1d_update_w4_kernel[grid](x, conv_state, weight, bias, y, D, *strides, SILU=bool(silu),
                                              BLOCK_D=cfg["BLOCK_D"], USE_PDL=pdl, launch_pdl=pdl,
                                              num_warps=cfg["num_warps"])
    else:
        _causal_conv1d_update_kernel[grid](x, conv_state, weight, bias, y, D, *strides, W=W, SILU=bool(silu),
                                           BLOCK_D=cfg["BLOCK_D"], BLOCK_W=triton.next_power_of_2(W),
                                           USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return y
