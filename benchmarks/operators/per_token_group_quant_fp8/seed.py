"""Seed per-token-group fp8 quantization: per (row, 128-channel group) scale = max(amax, 1e-10) / 448 and
xq = e4m3fn(clamp(x / scale)); scale row-major [T, H/128].

Memory-bound: the (row, group) pairs are numbered row-major, which is also the scale's layout, and each
program quantizes BLOCK_G consecutive pairs as a [BLOCK_G, 128] tile, so x is read once and the scales are
stored as one contiguous run. One launch, no host synchronization.

ROUND_IN_FP32 rounds onto the e4m3fn grid with exact fp32 arithmetic before the store's cast. Triton's CPU
interpreter needs it (its fp32 -> fp8 cast drops the carry into the exponent, 127.99 -> 64, and rounds ties
away from zero), and its cast is exact for values already on the grid. On a GPU the hardware cast
(cvt.rn.satfinite) rounds to nearest even by itself; CONFIGS["round_in_fp32"] forces the fp32 path there too.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by the number of (row, group) pairs: the smallest key at or above it (else the largest).
# Few pairs (decode) want small tiles so that enough programs run; many want tiles of 16 KiB and more.
# The largest bucket with 4 warps: the variant `big_g16_w4`, 45.0 us at T = 8192 H = 7168 on the H200 (from
# 54.4; 2026-12-02, benchmarks/results/new_ops_h200.md).
# The 16384 bucket (T = 64-256 at H = 7168) with 8 groups a program, not 4: 0.92 of the time at T256-H7168 and
# 0.96-0.99 at T64 (H100, three runs of 5, 9 and 9 paired rounds, session 35,
# benchmarks/results/session35_h100.md).
CONFIGS = {
    "round_in_fp32": False,
    "by_pairs": {
        1024: {"BLOCK_G": 2, "num_warps": 2},
        16384: {"BLOCK_G": 8, "num_warps": 4},
        262144: {"BLOCK_G": 8, "num_warps": 4},
        1 << 40: {"BLOCK_G": 16, "num_warps": 4},
    },
    # 1: a program's (row, group) indices by 32-bit division (the pair count is an int32 already), widened to int64
    # only for the byte offsets; 0: by int64 division (the seed before session 35). Offline for sm_90 (Triton 3.6,
    # 2 groups on 2 warps): 144 SASS instructions against 248, the x load issued 22 instructions sooner (the 53rd,
    # not the 75th), with no 64-bit divide and its branch to a subroutine before it. At decode the instructions
    # before the load are on the call's critical path. On an H100 (session 36, 9 paired rounds) the variant `index64`
    # read 0.996-1.013 of the seed's time: within noise.
    "index32": 1,
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.99-1.14 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"PDL": [0, 1], "index32": [0, 1]}


@triton.jit
def _round_to_e4m3(v):
    # The e4m3fn spacing of v's binade, 2^(e-3), with subnormals (below 2^-6) spaced like the smallest
    # binade; built from exponent bits so the scaling is exact. Adding 1.5 * 2^23 rounds to an integer, ties
    # to even (|v| / spacing < 16).
    e = tl.maximum(((v.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)
    step = ((e + 124) << 23).to(tl.float32, bitcast=True)
    inv_step = ((130 - e) << 23).to(tl.float32, bitcast=True)
    return ((v * inv_step + 12582912.0) - 12582912.0) * step


@triton.jit
def _per_token_group_quant_fp8_kernel(x_ptr, q_ptr, s_ptr, n_pairs, groups_per_row, stride_x_row, stride_x_col,
                                      stride_q_row, GROUP: tl.constexpr, BLOCK_G: tl.constexpr,
                                      ROUND_IN_FP32: tl.constexpr, INDEX32: tl.constexpr = True,
                                      USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pairs = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    pair_mask = pairs < n_pairs
    pairs64 = pairs.to(tl.int64)
    if INDEX32:
        rows32 = pairs // groups_per_row
        rows = rows32.to(tl.int64)
        first_col = ((pairs - rows32 * groups_per_row) * GROUP).to(tl.int64)
    else:
        rows = pairs64 // groups_per_row
        first_col = (pairs64 % groups_per_row) * GROUP
    cols = first_col[:, None] + tl.arange(0, GROUP)[None, :]
    mask = pair_mask[:, None]
    x = tl.load(x_ptr + rows[:, None] * stride_x_row + cols * stride_x_col, mask=mask, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-10) / 448.0
    tl.store(s_ptr + pairs64, scale, mask=pair_mask)
    v = tl.minimum(tl.maximum(x / scale[:, None], -448.0), 448.0)
    if ROUND_IN_FP32:
        v = _round_to_e4m3(v)
    tl.store(q_ptr + rows[:, None] * stride_q_row + cols, v.to(q_ptr.dtype.element_ty), mask=mask)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(n_pairs: int) -> dict:
    table = CONFIGS["by_pairs"]
    fitting = [k for k in sorted(table) if k >= n_pairs]
    return table[fitting[0] if fitting else max(table)]


def per_token_group_quant_fp8(x, group_size=128):
    if x.dim() != 2 or group_size != 128 or x.shape[1] % group_size:
        raise ValueError(f"per_token_group_quant_fp8 expects x[T,H] with H a multiple of group_size=128; got "
                         f"shape {tuple(x.shape)}, group_size {group_size}")
    T, H = x.shape
    groups = H // group_size
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T, groups), dtype=torch.float32, device=x.device)
    n_pairs = T * groups
    if n_pairs == 0:
        return xq, scale
    cfg = _config(n_pairs)
    grid = (triton.cdiv(n_pairs, cfg["BLOCK_G"]),)
    pdl = _pdl(x)
    _per_token_group_quant_fp8_kernel[grid](x, xq, scale, n_pairs, groups, x.stride(0), x.stride(1), xq.stride(0),
                                            GROUP=group_size, BLOCK_G=cfg["BLOCK_G"],
                                            ROUND_IN_FP32=bool(CONFIGS["round_in_fp32"]) or not x.is_cuda,
                                            INDEX32=bool(CONFIGS["index32"]), USE_PDL=pdl, launch_pdl=pdl,
                                            num_warps=cfg["num_warps"])
    return xq, scale
