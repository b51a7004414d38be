"""Seed per-token fp8 quantization: scale[t] = max(amax_t / 448, 1/(448*512)), xq = e4m3fn(clamp(x / scale)).

Memory-bound (2-3 bytes in, 1 out per element): each program quantizes ROWS rows held in registers, so x is
read once. Rows wider than CONFIGS["max_block_h"] take two passes (amax, then quantize), the second re-reading
x. One launch, no host synchronization.

ROUND_IN_FP32 rounds onto the e4m3fn grid with exact fp32 arithmetic before the store's cast. Triton's CPU
interpreter needs it (its fp32 -> fp8 cast drops the carry into the exponent, 127.99 -> 64, and rounds ties
away from zero), and its cast is exact for values already on the grid. On a GPU the hardware cast
(cvt.rn.satfinite) rounds to nearest even by itself; CONFIGS["round_in_fp32"] forces the fp32 path there too.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_H (H rounded up to a power of two; wider rows use the largest key).
# Rows of 7168 (BLOCK_H 8192) on 8 warps, 32 elements a thread, not 16 warps: 0.94-0.97 of the time at
# T = 16-256 and the same at T = 4096-8192 (H100, three runs of 5, 9 and 9 paired rounds, session 35,
# benchmarks/results/session35_h100.md; 32 warps took longer everywhere, 4 sat between).
CONFIGS = {
    "max_block_h": 8192,
    "round_in_fp32": False,
    "by_block_h": {
        256: {"ROWS": 8, "num_warps": 4},
        512: {"ROWS": 4, "num_warps": 4},
        1024: {"ROWS": 2, "num_warps": 4},
        2048: {"ROWS": 1, "num_warps": 4},
        4096: {"ROWS": 1, "num_warps": 8},
        8192: {"ROWS": 1, "num_warps": 8},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.99-1.04 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"PDL": [0, 1]}



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
def _quantize_store(q_ptrs, x, inv_scale, mask, ROUND_IN_FP32: tl.constexpr):
    v = tl.minimum(tl.maximum(x * inv_scale, -448.0), 448.0)
    if ROUND_IN_FP32:
        v = _round_to_e4m3(v)
    tl.store(q_ptrs, v.to(q_ptrs.dtype.element_ty), mask=mask)


@triton.jit
def _per_token_quant_fp8_kernel(x_ptr, q_ptr, s_ptr, T, H, stride_x_row, stride_x_col, stride_q_row,
                                ROWS: tl.constexpr, BLOCK_H: tl.constexpr, NUM_CHUNKS: tl.constexpr,
                                ROUND_IN_FP32: tl.constexpr, USE_PDL: tl.constexpr = False):
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
        mask = row_mask[:, None] & (cols < H)[None, :]
        x = tl.load(x_rows + cols[None, :] * stride_x_col, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=1) / 448.0, 1.0 / (448.0 * 512.0))
        tl.store(s_ptr + rows, scale, mask=row_mask)
        _quantize_store(q_rows + cols[None, :], x, (1.0 / scale)[:, None], mask, ROUND_IN_FP32)
    else:
        amax = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.abs(x))
        scale = tl.maximum(tl.max(amax, axis=1) / 448.0, 1.0 / (448.0 * 512.0))
        tl.store(s_ptr + rows, scale, mask=row_mask)
        inv_scale = (1.0 / scale)[:, None]
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            _quantize_store(q_rows + cc[None, :], x, inv_scale, mask, ROUND_IN_FP32)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(block_h: int) -> dict:
    table = CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    return table[fitting[0] if fitting else max(table)]


def per_token_quant_fp8(x):
    if x.dim() != 2:
        raise ValueError(f"per_token_quant_fp8 expects x[T,H]; got shape {tuple(x.shape)}")
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T,), dtype=torch.float32, device=x.device)
    if T == 0 or H == 0:
        return xq, scale
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    cfg = _config(block_h)
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    pdl = _pdl(x)
    _per_token_quant_fp8_kernel[grid](x, xq, scale, T, H, x.stride(0), x.stride(1), xq.stride(0),
                                      ROWS=cfg["ROWS"], BLOCK_H=block_h, NUM_CHUNKS=triton.cdiv(H, block_h),
                                      ROUND_IN_FP32=bool(CONFIGS["round_in_fp32"]) or not x.is_cuda,
                                      USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return xq, scale
