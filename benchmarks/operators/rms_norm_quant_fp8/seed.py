"""Seed RMSNorm + per-token fp8 quantization: y = x * rstd * weight in fp32, scale = max(amax|y| / 448,
1/(448*512)), xq = e4m3fn(clamp(y / scale)).

Memory-bound: each program handles ROWS rows held in registers (x read once, the weight once for all of
them). Rows wider than CONFIGS["max_block_h"] take two passes: the sum of squares and amax|x * weight|
together (amax|y| = rstd * amax|x * weight|, rstd > 0), then the quantization, re-reading x. One launch, no
host synchronization.

ROUND_IN_FP32 rounds onto the e4m3fn grid with exact fp32 arithmetic before the store's cast. Triton's CPU
interpreter needs it (its fp32 -> fp8 cast drops the carry into the exponent, 127.99 -> 64, and rounds ties
away from zero), and its cast is exact for values already on the grid. On a GPU the hardware cast
(cvt.rn.satfinite) rounds to nearest even by itself; CONFIGS["round_in_fp32"] forces the fp32 path there too.

EVEN (CONFIGS["even"], one-chunk rows): when a program takes one row and H is BLOCK_H, every element is in
bounds (the grid has one program a row), so the loads and the stores go without masks: fewer instructions on
the dependent chain a decode program's time is (as layer_norm's EVEN, 0.92-0.97 of its time there). Here,
on the H200 (2026-12-04, the variant `masked`): 0.98 of the time at T = 4096-8192, H = 8192 (27.53 / 51.67 us
against 28.10 / 52.41), within noise at decode (3.00 / 4.55 / 2.76 us at T = 64 / 256 / 16 against
3.07 / 4.53 / 2.61).
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_H (H rounded up to a power of two; wider rows use the largest key). ONE_REDUCE=1
# (rows that fit one chunk) takes the sum of squares and amax|x * weight| in one two-value reduction (one
# cross-warp exchange, not two in a row) and rstd by rsqrt: decode rows are latency-bound on that chain. With
# 8 warps at H = 8192 it was the fastest variant on every hot shape (2026-12-03: 0.90-0.94 of the seed's time
# with two reductions and 16 warps).
CONFIGS = {
    "max_block_h": 8192,
    "round_in_fp32": False,
    "ONE_REDUCE": 1,
    "even": 1,                 # 0: masks everywhere (the seed before 2026-12-04)
    "by_block_h": {
        256: {"ROWS": 8, "num_warps": 4},
        512: {"ROWS": 4, "num_warps": 4},
        1024: {"ROWS": 2, "num_warps": 4},
        2048: {"ROWS": 1, "num_warps": 4},
        4096: {"ROWS": 1, "num_warps": 8},
        8192: {"ROWS": 1, "num_warps": 8},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): each kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). Off: on H100s 1.00-1.04 of the time (session 22), 1.01-1.02 at decode in
    # 9 paired rounds (session 36, the variant `pdl`) and 1.001-1.034 at T = 16-256 in 9 more (session38_h100.md).
    "PDL": 0,
}
# code paths, not sizes: the offline search may flip them
SEARCH_SPACE = {"ONE_REDUCE": [0, 1], "even": [0, 1], "PDL": [0, 1]}


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
def _quantize_store(q_ptrs, y, inv_scale, mask, ROUND_IN_FP32: tl.constexpr, EVEN: tl.constexpr = False):
    v = tl.minimum(tl.maximum(y * inv_scale, -448.0), 448.0)
    if ROUND_IN_FP32:
        v = _round_to_e4m3(v)
    if EVEN:
        tl.store(q_ptrs, v.to(q_ptrs.dtype.element_ty))
    else:
        tl.store(q_ptrs, v.to(q_ptrs.dtype.element_ty), mask=mask)


@triton.jit
def _sum_and_max(s_a, m_a, s_b, m_b):
    return s_a + s_b, tl.maximum(m_a, m_b)


@triton.jit
def _rms_norm_quant_fp8_kernel(x_ptr, w_ptr, q_ptr, s_ptr, T, H, stride_x_row, stride_x_col, stride_w,
                               stride_q_row, eps, ROWS: tl.constexpr, BLOCK_H: tl.constexpr,
                               NUM_CHUNKS: tl.constexpr, ROUND_IN_FP32: tl.constexpr, ONE_REDUCE: tl.constexpr,
                               EVEN: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < T
    rows64 = rows.to(tl.int64)
    x_rows = x_ptr + rows64[:, None] * stride_x_row
    q_rows = q_ptr + rows64[:, None] * stride_q_row
    cols = tl.arange(0, BLOCK_H)
    if NUM_CHUNKS == 1:
        col_mask = cols < H
        mask = row_mask[:, None] & col_mask[None, :]
        if EVEN:        # one row, H == BLOCK_H: nothing out of bounds
            x = tl.load(x_rows + cols[None, :] * stride_x_col, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols * stride_w, eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_rows + cols[None, :] * stride_x_col, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols * stride_w, mask=col_mask, other=0.0,
                        eviction_policy="evict_last").to(tl.float32)
        xw = x * w[None, :]
        if ONE_REDUCE:
            sq, amax = tl.reduce((x * x, tl.abs(xw)), 1, _sum_and_max)
            rstd = tl.rsqrt(sq / H + eps)
        else:
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / H + eps)
            amax = tl.max(tl.abs(xw), axis=1)
        scale = tl.maximum(amax * rstd / 448.0, 1.0 / (448.0 * 512.0))
        if EVEN:
            tl.store(s_ptr + rows, scale)
        else:
            tl.store(s_ptr + rows, scale, mask=row_mask)
        _quantize_store(q_rows + cols[None, :], xw * rstd[:, None], (1.0 / scale)[:, None], mask, ROUND_IN_FP32,
                        EVEN)
    else:
        sq = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        amax = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            col_mask = cc < H
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cc * stride_w, mask=col_mask, other=0.0).to(tl.float32)
            sq += x * x
            amax = tl.maximum(amax, tl.abs(x * w[None, :]))
        rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=1) / H + eps)
        scale = tl.maximum(tl.max(amax, axis=1) * rstd / 448.0, 1.0 / (448.0 * 512.0))
        tl.store(s_ptr + rows, scale, mask=row_mask)
        inv_scale = (1.0 / scale)[:, None]
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            col_mask = cc < H
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cc * stride_w, mask=col_mask, other=0.0).to(tl.float32)
            _quantize_store(q_rows + cc[None, :], x * w[None, :] * rstd[:, None], inv_scale, mask, ROUND_IN_FP32)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(block_h: int) -> dict:
    table = CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    return table[fitting[0] if fitting else max(table)]


def rms_norm_quant_fp8(x, weight, eps=1e-6):
    if x.dim() != 2 or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"rms_norm_quant_fp8 expects x[T,H], weight[H]; got x {tuple(x.shape)}, "
                         f"weight {tuple(weight.shape)}")
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T,), dtype=torch.float32, device=x.device)
    if T == 0 or H == 0:
        return xq, scale
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    cfg = _config(block_h)
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    pdl = _pdl(x)
    _rms_norm_quant_fp8_kernel[grid](x, weight, xq, scale, T, H, x.stride(0), x.stride(1), weight.stride(0),
                                     xq.stride(0), eps, ROWS=cfg["ROWS"], BLOCK_H=block_h,
                                     NUM_CHUNKS=triton.cdiv(H, block_h),
                                     ROUND_IN_FP32=bool(CONFIGS["round_in_fp32"]) or not x.is_cuda,
                                     ONE_REDUCE=CONFIGS["ONE_REDUCE"],
                                     EVEN=int(bool(CONFIGS["even"]) and cfg["ROWS"] == 1 and H == block_h),
                                     USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return xq, scale
