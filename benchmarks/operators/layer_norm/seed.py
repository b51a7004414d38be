"""Seed LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias, loads in the storage dtype, fp32 math.

Memory-bound: each program normalizes ROWS rows held in registers (one read of x, one write of y; the
variance is taken of the centred values, never E[x^2] - mean^2). Rows wider than CONFIGS["max_block_h"]
take three passes over x (mean, centred variance, normalize). One launch, no host synchronization.

Structural switches (constexpr, per table entry; 0 is the earlier seed):
- PRELOAD_WB=1 issues the weight and bias loads before x's (one-pass rows), so their latency overlaps x's
  instead of following the two row reductions: at decode (T = 16-256, one row per program) each program's
  time is a chain of dependent latencies, and the later loads were one more L2 round trip at its end.
- RSQRT=1 takes rstd = rsqrt(var + eps) (one MUFU op) instead of 1 / sqrt(var + eps) (sqrt, then a divide).
- CHAN=G > 0 (one-pass rows): each thread takes the count, mean and centred sum of squares of each of its groups
  of G contiguous elements in registers, and one three-value reduction merges the groups (Chan et al.'s
  pairwise update: exact centring, no E[x^2] - mean^2), so the row's statistics cost one exchange across the
  program's warps instead of two in a row (the mean's, then the variance's). At decode each program's time is
  its chain of dependent steps, and a cross-warp reduction is a barrier and a shared-memory round trip.
  Measured slower on the H200 and off (2026-12-03): 3.71-4.09 us at T = 16-64 against 2.61-2.78 (the merge's
  divides and three values a shuffle cost more than the exchange it saves); a switch for the search only.
- SHIFT=1 (one-pass rows, CHAN=0): one two-value reduction of plain sums, s = sum(x - K) and q = sum((x - K)^2)
  with K = the row's first element (a load every thread issues beside x's, from the same line), then
  var = (q - s^2 / H) / H. Shifting by a value of the row keeps the cancellation small (the relative error of
  var grows with (mean - K)^2 / var, not mean^2 / var as E[x^2] - mean^2's does), and one exchange across the
  warps replaces two in a row, as rms_norm_quant_fp8's ONE_REDUCE does for its sum and amax. Only for 2-byte
  dtypes: their output ulp is 2^13 (fp16) to 2^16 (bf16) times fp32's, so the shift's rounding cannot show;
  fp32 rows keep the centred two-pass statistics (SHIFT is ignored for them).
- EVEN (CONFIGS["even"], one-pass rows): when H is BLOCK_H and a program takes one row, every element of its
  tile is in bounds (the grid has one program a row), so the loads, the centring and the store go without
  masks: fewer instructions in a decode program whose time is its dependent chain.
Row counts up to CONFIGS["decode_max_t"] take the decode table, larger ones by_block_h.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_H (H rounded up to a power of two; larger sizes use the largest key); every entry
# gives each thread 16 elements of x.
# The decode table preloads weight and bias and takes rsqrt: the variant `decode_preload_rsqrt`, fastest of
# ours at T = 16-256 on the H200 (2026-12-02, benchmarks/results/new_ops_h200.md; 2.46-3.44 us, from 2.98-3.86).
# It takes the statistics in one reduction (SHIFT): 0.97-1.01 of the time at T = 16-256, H = 4096 (the variant
# `decode_shift`, 2026-12-03; the other widths were not timed with it). Prefill rows showed no difference (the
# variant `shift`, within 1%), so the prefill table keeps the centred two passes.
CONFIGS = {
    "max_block_h": 8192,
    "decode_max_t": 256,
    "by_block_h": {
        256: {"ROWS": 8, "num_warps": 4, "PRELOAD_WB": 0, "RSQRT": 0, "CHAN": 0, "SHIFT": 0},
        512: {"ROWS": 4, "num_warps": 4, "PRELOAD_WB": 0, "RSQRT": 0, "CHAN": 0, "SHIFT": 0},
        1024: {"ROWS": 2, "num_warps": 4, "PRELOAD_WB": 0, "RSQRT": 0, "CHAN": 0, "SHIFT": 0},
        2048: {"ROWS": 1, "num_warps": 4, "PRELOAD_WB": 0, "RSQRT": 0, "CHAN": 0, "SHIFT": 0},
        4096: {"ROWS": 1, "num_warps": 8, "PRELOAD_WB": 0, "RSQRT": 0, "CHAN": 0, "SHIFT": 0},
        8192: {"ROWS": 1, "num_warps": 16, "PRELOAD_WB": 0, "RSQRT": 0, "CHAN": 0, "SHIFT": 0},
    },
    "decode_by_block_h": {
        256: {"ROWS": 8, "num_warps": 4, "PRELOAD_WB": 1, "RSQRT": 1, "CHAN": 0, "SHIFT": 1},
        512: {"ROWS": 4, "num_warps": 4, "PRELOAD_WB": 1, "RSQRT": 1, "CHAN": 0, "SHIFT": 1},
        1024: {"ROWS": 2, "num_warps": 4, "PRELOAD_WB": 1, "RSQRT": 1, "CHAN": 0, "SHIFT": 1},
        2048: {"ROWS": 1, "num_warps": 4, "PRELOAD_WB": 1, "RSQRT": 1, "CHAN": 0, "SHIFT": 1},
        4096: {"ROWS": 1, "num_warps": 8, "PRELOAD_WB": 1, "RSQRT": 1, "CHAN": 0, "SHIFT": 1,
               "small_t_num_warps": 16},
        8192: {"ROWS": 1, "num_warps": 16, "PRELOAD_WB": 1, "RSQRT": 1, "CHAN": 0, "SHIFT": 1},
    },
    # Decode calls of at most this many rows take their entry's small_t_num_warps where it has one: a row of
    # 4096 on 16 warps (8 elements a thread) read 2.46 / 2.69 us at T = 16 / 64 against 2.59 / 2.77 on 8, but
    # 3.62 against 3.48 at T = 256 (variants `decode_shift_w16` and `decode_shift`, 2026-12-03).
    "decode_small_t": 64,
    # drop the masks where every element is in bounds (EVEN above); 0 keeps them everywhere (the earlier seed).
    # 0.92-0.97 of the masked path's time at T = 16-256, H = 4096 and 0.98 at prefill on the H200 (2026-12-04:
    # 2.39 / 2.57 / 3.37 us against 2.48 / 2.80 / 3.48, the variant `masked`; new_ops_h200.md, session 19)
    "even": 1,
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.99-1.02 of the time without it (one timing a shape,
    # session22_h100.md) and 1.004-1.014 at T = 16-4096 (medians of 9 paired rounds, session38_h100.md, where a
    # search had accepted it beside the worker pool's start-ups): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"PRELOAD_WB": [0, 1], "RSQRT": [0, 1], "CHAN": [0, 4, 8], "SHIFT": [0, 1], "even": [0, 1],
                "PDL": [0, 1]}


@triton.jit
def _chan_merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Count, mean and centred sum of squares of two disjoint sets from each one's (Chan, Golub, LeVeque)."""
    n = n_a + n_b
    f = n_b / tl.maximum(n, 1.0)          # two empty sets (masked groups) merge to an empty one, not 0 / 0
    d = mean_b - mean_a
    return n, mean_a + d * f, m2_a + m2_b + d * d * n_a * f


@triton.jit
def _add_pair(s_a, q_a, s_b, q_b):
    return s_a + s_b, q_a + q_b


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, T, H, stride_x_row, stride_x_col, stride_y_row, eps,
                       ROWS: tl.constexpr, BLOCK_H: tl.constexpr, NUM_CHUNKS: tl.constexpr,
                       PRELOAD_WB: tl.constexpr, RSQRT: tl.constexpr, CHAN: tl.constexpr, SHIFT: tl.constexpr,
                       EVEN: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < T
    rows64 = rows.to(tl.int64)
    x_rows = x_ptr + rows64[:, None] * stride_x_row
    y_rows = y_ptr + rows64[:, None] * stride_y_row
    cols = tl.arange(0, BLOCK_H)
    if NUM_CHUNKS == 1 and EVEN:
        # one row, H == BLOCK_H: nothing out of bounds, the same steps as below without masks
        if PRELOAD_WB:
            w = tl.load(w_ptr + cols, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + cols, eviction_policy="evict_last").to(tl.float32)
        x = tl.load(x_rows + cols[None, :] * stride_x_col, eviction_policy="evict_first").to(tl.float32)
        if SHIFT:
            k = tl.load(x_rows).to(tl.float32)                                        # [1, 1]: x[row, 0]
            xs = x - k
            s, q = tl.reduce((xs, xs * xs), 1, _add_pair)
            mean = k.reshape([ROWS]) + s / H
            var = tl.maximum(q - s * (s / H), 0.0) / H
        else:
            mean = tl.sum(x, axis=1) / H
            var = tl.sum((x - mean[:, None]) * (x - mean[:, None]), axis=1) / H
        xc = x - mean[:, None]
        if RSQRT:
            rstd = tl.rsqrt(var + eps)
        else:
            rstd = 1.0 / tl.sqrt(var + eps)
        if not PRELOAD_WB:
            w = tl.load(w_ptr + cols, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + cols, eviction_policy="evict_last").to(tl.float32)
        y = xc * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty))
    elif NUM_CHUNKS == 1:
        col_mask = cols < H
        mask = row_mask[:, None] & col_mask[None, :]
        if PRELOAD_WB:
            w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        x = tl.load(x_rows + cols[None, :] * stride_x_col, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        if SHIFT:
            k = tl.load(x_rows, mask=row_mask[:, None], other=0.0).to(tl.float32)      # [ROWS, 1]: x[row, 0]
            xs = tl.where(mask, x - k, 0.0)
            s, q = tl.reduce((xs, xs * xs), 1, _add_pair)
            mean = k.reshape([ROWS]) + s / H
            xc = tl.where(mask, x - mean[:, None], 0.0)
            var = tl.maximum(q - s * (s / H), 0.0) / H
        elif CHAN > 0:
            # groups of CHAN contiguous elements, a thread's own registers (its vector loads' elements)
            xg = tl.reshape(x, [ROWS, BLOCK_H // CHAN, CHAN])
            inside = tl.reshape(mask.to(tl.float32), [ROWS, BLOCK_H // CHAN, CHAN])
            n_g = tl.sum(inside, axis=2)
            mean_g = tl.sum(xg, axis=2) / tl.maximum(n_g, 1.0)       # masked elements were loaded as 0
            dev = (xg - mean_g[:, :, None]) * inside
            _, mean, m2 = tl.reduce((n_g, mean_g, tl.sum(dev * dev, axis=2)), 1, _chan_merge)
            xc = tl.where(mask, x - mean[:, None], 0.0)
            var = m2 / H
        else:
            mean = tl.sum(x, axis=1) / H
            xc = tl.where(mask, x - mean[:, None], 0.0)
            var = tl.sum(xc * xc, axis=1) / H
        if RSQRT:
            rstd = tl.rsqrt(var + eps)
        else:
            rstd = 1.0 / tl.sqrt(var + eps)
        if not PRELOAD_WB:
            w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = xc * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            acc += tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=1) / H
        acc = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0).to(tl.float32)
            xc = tl.where(mask, x - mean[:, None], 0.0)
            acc += xc * xc
        if RSQRT:
            rstd = tl.rsqrt(tl.sum(acc, axis=1) / H + eps)
        else:
            rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / H + eps)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            col_mask = cc < H
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cc, mask=col_mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cc, mask=col_mask, other=0.0).to(tl.float32)
            y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
            tl.store(y_rows + cc[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(T: int, block_h: int) -> dict:
    table = CONFIGS["decode_by_block_h"] if T <= CONFIGS["decode_max_t"] else CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    cfg = table[fitting[0] if fitting else max(table)]
    if T <= CONFIGS["decode_small_t"] and "small_t_num_warps" in cfg:
        cfg = dict(cfg, num_warps=cfg["small_t_num_warps"])
    return cfg


def _even(cfg: dict, H: int, block_h: int) -> int:
    """1 where the unmasked one-pass path applies: one row a program, H == BLOCK_H, not CHAN's groups."""
    return int(bool(CONFIGS["even"]) and cfg["ROWS"] == 1 and H == block_h and not cfg["CHAN"])


def layer_norm(x, weight, bias, eps=1e-5):
    if x.dim() != 2 or weight.shape != (x.shape[1],) or bias.shape != (x.shape[1],):
        raise ValueError(f"layer_norm expects x[T,H], weight[H], bias[H]; got x {tuple(x.shape)}, "
                         f"weight {tuple(weight.shape)}, bias {tuple(bias.shape)}")
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    if T == 0 or H == 0:
        return y
    weight, bias = weight.contiguous(), bias.contiguous()
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    cfg = _config(T, block_h)
    shift = cfg["SHIFT"] if x.element_size() == 2 else 0          # fp32 rows: the centred statistics only
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    even = _even(cfg, H, block_h)
    pdl = _pdl(x)
    _layer_norm_kernel[grid](x, weight, bias, y, T, H, x.stride(0), x.stride(1), y.stride(0), eps,
                             ROWS=cfg["ROWS"], BLOCK_H=block_h, NUM_CHUNKS=triton.cdiv(H, block_h),
                             PRELOAD_WB=cfg["PRELOAD_WB"], RSQRT=cfg["RSQRT"], CHAN=cfg["CHAN"],
                             SHIFT=shift, EVEN=even, USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return y
