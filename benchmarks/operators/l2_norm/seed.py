"""Seed L2 norm: y = x / max(||x||_2, eps), loads in the storage dtype, math in fp32.

Memory-bound, and its rows are short (H = 128 per attention head): each program normalizes ROWS rows held
in registers, so one program moves enough bytes to hide DRAM latency. Rows wider than
CONFIGS["max_block_h"] take two passes (sum of squares, then scale), the second re-reading x.
One launch per call and no host synchronization, so the call can be captured in a CUDA graph.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_H (H rounded up to a power of two); sizes above the largest key use the largest
# key's entry. ROWS x BLOCK_H / (32 * num_warps) is 16 elements a thread in every entry (two 16-byte bf16
# vectors).
CONFIGS = {
    "max_block_h": 8192,
    "by_block_h": {
        128: {"ROWS": 16, "num_warps": 4},
        256: {"ROWS": 8, "num_warps": 4},
        512: {"ROWS": 4, "num_warps": 4},
        1024: {"ROWS": 2, "num_warps": 4},
        2048: {"ROWS": 1, "num_warps": 4},
        4096: {"ROWS": 1, "num_warps": 8},
        8192: {"ROWS": 1, "num_warps": 16},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). Timed on neither card yet (session 22's batch ran out of time first; the
    # variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"PDL": [0, 1]}


@triton.jit
def _l2_norm_kernel(x_ptr, y_ptr, T, H, stride_x_row, stride_x_col, stride_y_row, eps,
                    ROWS: tl.constexpr, BLOCK_H: tl.constexpr, NUM_CHUNKS: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < T
    rows64 = rows.to(tl.int64)   # rows * stride passes 2^31 elements on large prefill batches
    x_rows = x_ptr + rows64[:, None] * stride_x_row
    y_rows = y_ptr + rows64[:, None] * stride_y_row
    cols = tl.arange(0, BLOCK_H)
    if NUM_CHUNKS == 1:
        mask = row_mask[:, None] & (cols < H)[None, :]
        x = tl.load(x_rows + cols[None, :] * stride_x_col, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(x * x, axis=1)), eps)
        tl.store(y_rows + cols[None, :], (x * inv[:, None]).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(acc, axis=1)), eps)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            tl.store(y_rows + cc[None, :], (x * inv[:, None]).to(y_ptr.dtype.element_ty), mask=mask)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(block_h: int) -> dict:
    table = CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    return table[fitting[0] if fitting else max(table)]


def l2_norm(x, eps=1e-6):
    if x.dim() != 2:
        raise ValueError(f"l2_norm expects x[T,H]; got x {tuple(x.shape)}")
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    if T == 0 or H == 0:
        return y
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    cfg = _config(block_h)
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    pdl = _pdl(x)
    _l2_norm_kernel[grid](x, y, T, H, x.stride(0), x.stride(1), y.stride(0), eps,
                          ROWS=cfg["ROWS"], BLOCK_H=block_h, NUM_CHUNKS=triton.cdiv(H, block_h),
                          USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return y
