"""Seed fused add + RMSNorm: residual_out = x + residual (rounded to the dtype), out = rms_norm(residual_out) * w.

Memory-bound: each program reads ROWS rows of x and residual once, keeps the rounded sum in registers, writes
residual_out, reduces its squares in fp32 and writes out; one launch, no host synchronization. Rows wider than
CONFIGS["max_block_h"] take two passes: the sum of squares first (writing residual_out), then x and residual
are read again and the same rounded sum is recomputed (no read-back of residual_out, which other threads of
the program wrote without a barrier). Structural switch (constexpr): ROUND_NORMED=1 rounds the normalized value
to the dtype before the weight multiply (vLLM's order; one more rounding, inside the tolerance), 0 rounds once.
PRELOAD_W=1 (one-chunk rows) issues the weight load before x's and residual's, so its latency overlaps theirs
instead of following the sum-of-squares reduction (0: the earlier seed, the weight loaded after it).
"""
import torch
import triton
import triton.language as tl

# Tunables by the number of rows T (decode or prefill table), then by BLOCK_H (H rounded up to a power of
# two; wider rows use the largest key). num_warps give each thread 8-16 elements of each of x and residual.
# The decode table preloads the weight, and 8 warps at BLOCK_H 8192: the variant `decode_preload_w8`, fastest
# of ours at T = 256 on the H200 (2026-12-02, benchmarks/results/new_ops_h200.md; within 1-2%, near noise).
CONFIGS = {
    "max_block_h": 8192,
    "decode_max_t": 256,
    "by_block_h": {
        256: {"ROWS": 8, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 0},
        512: {"ROWS": 4, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 0},
        1024: {"ROWS": 2, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 0},
        2048: {"ROWS": 1, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 0},
        4096: {"ROWS": 1, "num_warps": 8, "ROUND_NORMED": 0, "PRELOAD_W": 0},
        8192: {"ROWS": 1, "num_warps": 16, "ROUND_NORMED": 0, "PRELOAD_W": 0},
    },
    "decode_by_block_h": {
        256: {"ROWS": 4, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 1},
        512: {"ROWS": 2, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 1},
        1024: {"ROWS": 1, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 1},
        2048: {"ROWS": 1, "num_warps": 4, "ROUND_NORMED": 0, "PRELOAD_W": 1},
        4096: {"ROWS": 1, "num_warps": 8, "ROUND_NORMED": 0, "PRELOAD_W": 1},
        8192: {"ROWS": 1, "num_warps": 8, "ROUND_NORMED": 0, "PRELOAD_W": 1},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.995-1.005 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"ROUND_NORMED": [0, 1], "PRELOAD_W": [0, 1], "PDL": [0, 1]}


@triton.jit
def _rounded_sum(x_ptr, r_ptr, rows64, cc, mask, stride_x, stride_r, out_dtype: tl.constexpr):
    """x + residual in fp32, rounded to the activation dtype and back: the residual stream as stored."""
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cc[None, :], mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + rows64[:, None] * stride_r + cc[None, :], mask=mask, other=0.0).to(tl.float32)
    return (x + r).to(out_dtype)


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, rout_ptr, T, H, stride_x, stride_r, stride_o,
                               stride_ro, eps, ROWS: tl.constexpr, BLOCK_H: tl.constexpr,
                               NUM_CHUNKS: tl.constexpr, ROUND_NORMED: tl.constexpr, PRELOAD_W: tl.constexpr,
                               USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rows64 = rows.to(tl.int64)          # T * stride can pass 2^31 elements on large prefill batches
    row_mask = rows < T
    cols = tl.arange(0, BLOCK_H)
    dt = rout_ptr.dtype.element_ty
    acc = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
    s = tl.zeros([ROWS, BLOCK_H], dtype=dt)
    if PRELOAD_W and NUM_CHUNKS == 1:
        w_pre = tl.load(w_ptr + cols, mask=cols < H, other=0.0, eviction_policy="evict_last").to(tl.float32)
    for c in range(NUM_CHUNKS):
        cc = c * BLOCK_H + cols
        mask = row_mask[:, None] & (cc < H)[None, :]
        s = _rounded_sum(x_ptr, r_ptr, rows64, cc, mask, stride_x, stride_r, dt)
        tl.store(rout_ptr + rows64[:, None] * stride_ro + cc[None, :], s, mask=mask)
        sf = s.to(tl.float32)
        acc += sf * sf
    rstd = tl.rsqrt(tl.sum(acc, axis=1) / H + eps)
    for c in range(NUM_CHUNKS):
        cc = c * BLOCK_H + cols
        col_mask = cc < H
        mask = row_mask[:, None] & col_mask[None, :]
        if NUM_CHUNKS > 1:      # one chunk: the sum is still in registers
            s = _rounded_sum(x_ptr, r_ptr, rows64, cc, mask, stride_x, stride_r, dt)
        if PRELOAD_W and NUM_CHUNKS == 1:
            w = w_pre
        else:
            w = tl.load(w_ptr + cc, mask=col_mask, other=0.0).to(tl.float32)
        normed = s.to(tl.float32) * rstd[:, None]
        if ROUND_NORMED:
            normed = normed.to(dt).to(tl.float32)
        tl.store(out_ptr + rows64[:, None] * stride_o + cc[None, :], (normed * w[None, :]).to(dt), mask=mask)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(T: int, block_h: int) -> dict:
    table = CONFIGS["decode_by_block_h"] if T <= CONFIGS["decode_max_t"] else CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    return dict(table[fitting[0] if fitting else max(table)])


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    if x.dim() != 2 or residual.shape != x.shape or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"fused_add_rms_norm expects x[T,H], residual[T,H], weight[H]; got x {tuple(x.shape)}, "
                         f"residual {tuple(residual.shape)}, weight {tuple(weight.shape)}")
    if x.stride(1) != 1 or residual.stride(1) != 1 or weight.stride(0) != 1:
        raise ValueError("fused_add_rms_norm expects unit column strides (rows may be strided views)")
    T, H = x.shape
    out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    residual_out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    if T == 0:
        return out, residual_out
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    cfg = _config(T, block_h)
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    pdl = _pdl(x)
    _fused_add_rms_norm_kernel[grid](x, residual, weight, out, residual_out, T, H, x.stride(0), residual.stride(0),
                                     out.stride(0), residual_out.stride(0), eps, ROWS=cfg["ROWS"], BLOCK_H=block_h,
                                     NUM_CHUNKS=triton.cdiv(H, block_h), ROUND_NORMED=cfg["ROUND_NORMED"],
                                     PRELOAD_W=cfg["PRELOAD_W"],
                                     USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return out, residual_out
