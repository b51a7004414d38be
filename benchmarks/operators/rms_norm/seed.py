"""Seed RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, loads in the storage dtype, math in fp32.

Memory-bound: each program reads ROWS rows of x once, keeps them in registers, and writes them once;
the weight is loaded once per program and reused for its rows. Rows up to CONFIGS["max_block_h"]
wide take one pass; wider rows take two (sum of squares, then normalize), the second re-reading x.
One launch per call and no host synchronization, so the call can be captured in a CUDA graph.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_H (H rounded up to a power of two); sizes above the largest key use the
# largest key's entry. ROWS: rows per program (several for narrow rows, so each program moves enough
# bytes and reuses the weight); num_warps: every entry gives each thread 16 elements of x, two 16-byte
# bf16 vectors (sm_90 compile: 38-40 registers, no spills).
CONFIGS = {
    "max_block_h": 8192,   # wider rows go in chunks (a 16384 chunk for H=16385 took 128 registers + stack)
    "by_block_h": {
        256: {"ROWS": 8, "num_warps": 4},
        512: {"ROWS": 4, "num_warps": 4},
        1024: {"ROWS": 2, "num_warps": 4},
        2048: {"ROWS": 1, "num_warps": 4},
        4096: {"ROWS": 1, "num_warps": 8},
        8192: {"ROWS": 1, "num_warps": 16},
    },
}


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, T, H, stride_x_row, stride_x_col, stride_w, stride_y_row, eps,
                     ROWS: tl.constexpr, BLOCK_H: tl.constexpr, NUM_CHUNKS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < T
    rows64 = rows.to(tl.int64)  # T * stride can pass 2^31 elements on large prefill batches
    x_rows = x_ptr + rows64[:, None] * stride_x_row
    y_rows = y_ptr + rows64[:, None] * stride_y_row
    cols = tl.arange(0, BLOCK_H)
    if NUM_CHUNKS == 1:
        # Whole row in registers: one read of x, one write of y.
        col_mask = cols < H
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :] * stride_x_col, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / H + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        # Rows too wide for registers: accumulate the sum of squares in fp32, then normalize chunk by chunk.
        acc = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / H + eps)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            col_mask = cc < H
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cc * stride_w, mask=col_mask, other=0.0).to(tl.float32)
            y = x * rstd[:, None] * w[None, :]
            tl.store(y_rows + cc[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _config(block_h: int) -> dict:
    table = CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    return table[fitting[0] if fitting else max(table)]


def rms_norm(x, weight, eps=1e-6):
    if x.dim() != 2 or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"rms_norm expects x[T,H] and weight[H]; got x {tuple(x.shape)}, weight {tuple(weight.shape)}")
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    if T == 0 or H == 0:
        return y
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    num_chunks = triton.cdiv(H, block_h)
    cfg = _config(block_h)
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    _rms_norm_kernel[grid](x, weight, y, T, H, x.stride(0), x.stride(1), weight.stride(0), y.stride(0), eps,
                           ROWS=cfg["ROWS"], BLOCK_H=block_h, NUM_CHUNKS=num_chunks, num_warps=cfg["num_warps"])
    return y
