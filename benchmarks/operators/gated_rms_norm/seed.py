"""Seed gated RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight * silu(z), loads in the storage dtype, math in fp32.

Memory-bound with short rows (H = 128 per value head): each program handles ROWS rows held in registers
and loads the weight once for all of them. Rows wider than CONFIGS["max_block_h"] take two passes (sum of
squares, then normalize and gate), the second re-reading x. One launch, no host synchronization.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_H (H rounded up to a power of two; larger sizes use the largest key). Every entry
# gives each thread 16 elements of x and 16 of z. Where T / ROWS would give fewer than min_programs programs
# (T = 1024 at H = 128: 256 programs of 4 rows on 132 SMs), ROWS halves until it does not (or reaches 1), and
# the warps shrink with it so each thread keeps 16 elements (at least one warp).
# FAST=1 (short rows, one chunk) takes rsqrt (one MUFU op, not sqrt and a divide), exp2 and an approximate
# divide for silu: fewer instructions in a program whose decode time is its dependent chain.
CONFIGS = {
    "max_block_h": 8192,
    "min_programs": 528,
    "FAST": 0,
    # the hint on the x and z loads: "evict_first" (streamed once) or "" (none). silu_and_mul's flat kernel read
    # 0.97 of its prefill time without it; here none read 1.02-1.04 at prefill (variant no_evict, since retired;
    # H200, 2026-12-04, new_ops_h200.md session 19)
    "x_evict": "evict_first",
    "by_block_h": {
        128: {"ROWS": 4, "num_warps": 1},
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
# code paths, not sizes: the search may flip them
SEARCH_SPACE = {"FAST": [0, 1], "x_evict": ["evict_first", ""], "PDL": [0, 1]}


@triton.jit
def _gated_rms_norm_kernel(x_ptr, z_ptr, w_ptr, y_ptr, T, H, stride_x_row, stride_x_col, stride_z_row,
                           stride_z_col, stride_w, stride_y_row, eps,
                           ROWS: tl.constexpr, BLOCK_H: tl.constexpr, NUM_CHUNKS: tl.constexpr,
                           FAST: tl.constexpr, X_EVICT: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < T
    rows64 = rows.to(tl.int64)
    x_rows = x_ptr + rows64[:, None] * stride_x_row
    z_rows = z_ptr + rows64[:, None] * stride_z_row
    y_rows = y_ptr + rows64[:, None] * stride_y_row
    cols = tl.arange(0, BLOCK_H)
    if NUM_CHUNKS == 1:
        col_mask = cols < H
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :] * stride_x_col, mask=mask, other=0.0,
                    eviction_policy=X_EVICT).to(tl.float32)
        z = tl.load(z_rows + cols[None, :] * stride_z_col, mask=mask, other=0.0,
                    eviction_policy=X_EVICT).to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        if FAST:
            rstd = tl.rsqrt(tl.sum(x * x, axis=1) / H + eps)
            gate = tl.fdiv(z, 1.0 + tl.exp2(z * -1.4426950408889634), ieee_rounding=False)
        else:
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / H + eps)
            gate = z / (1.0 + tl.exp(-z))
        y = x * rstd[:, None] * w[None, :] * gate
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
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
                        eviction_policy=X_EVICT).to(tl.float32)
            z = tl.load(z_rows + cc[None, :] * stride_z_col, mask=mask, other=0.0,
                        eviction_policy=X_EVICT).to(tl.float32)
            w = tl.load(w_ptr + cc * stride_w, mask=col_mask, other=0.0).to(tl.float32)
            y = x * rstd[:, None] * w[None, :] * (z / (1.0 + tl.exp(-z)))
            tl.store(y_rows + cc[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(block_h: int, T: int) -> dict:
    table = CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    cfg = dict(table[fitting[0] if fitting else max(table)])
    rows = cfg["ROWS"]
    while rows > 1 and triton.cdiv(T, rows) < CONFIGS["min_programs"]:
        rows //= 2
    if rows != cfg["ROWS"]:
        cfg["num_warps"] = max(1, cfg["num_warps"] * rows // cfg["ROWS"])
        cfg["ROWS"] = rows
    return cfg


def gated_rms_norm(x, z, weight, eps=1e-6):
    if x.dim() != 2 or z.shape != x.shape or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"gated_rms_norm expects x[T,H], z[T,H], weight[H]; got x {tuple(x.shape)}, "
                         f"z {tuple(z.shape)}, weight {tuple(weight.shape)}")
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    if T == 0 or H == 0:
        return y
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    cfg = _config(block_h, T)
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    pdl = _pdl(x)
    _gated_rms_norm_kernel[grid](x, z, weight, y, T, H, x.stride(0), x.stride(1), z.stride(0), z.stride(1),
                                 weight.stride(0), y.stride(0), eps, ROWS=cfg["ROWS"], BLOCK_H=block_h,
                                 NUM_CHUNKS=triton.cdiv(H, block_h), FAST=CONFIGS["FAST"], X_EVICT=CONFIGS["x_evict"],
                                 USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return y
