"""Seed RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, loads in the storage dtype, math in fp32.

Memory-bound: each program reads ROWS rows of x once, keeps them in registers, and writes them once.
Rows up to CONFIGS["max_block_h"] wide take one pass; wider rows take two (sum of squares, then
normalize), the second re-reading x. Structural switch per bucket (constexpr):
- PERSISTENT=0: one program per block of ROWS rows (the earlier seed);
- PERSISTENT=1: PROGRAMS_PER_SM programs per SM loop over the row blocks; the weight is loaded once
  per program instead of once per row block, and with LOOP_STAGES >= 2 the compiler may prefetch the
  next block's rows while the current one is reduced.
One launch per call and no host synchronization, so the call can be captured in a CUDA graph.
EVEN (CONFIGS["even"], one-pass rows): when a program's block is one row and H is BLOCK_H, every element is
in bounds, so the loads and the store go without masks: fewer instructions on the dependent chain a decode
program's time is (layer_norm's EVEN: 0.92-0.97 of its time at T = 16-256).
"""
import torch
import triton
import triton.language as tl

# Tunables by the number of rows T (decode or prefill table), then by BLOCK_H (H rounded up to a power
# of two; sizes above the largest key use the largest key's entry). The num_warps give
# each thread 16 elements of x, two 16-byte bf16 vectors (sm_90 compile: 38-40 registers, no spills).
# Defaults are the 2026-11-29 seed's; agent/studies/measure_baselines.py times the switches per shape.
CONFIGS = {
    "max_block_h": 8192,   # wider rows go in chunks (a 16384 chunk for H=16385 took 128 registers + stack)
    "decode_max_t": 256,   # T up to this uses "decode_by_block_h", larger T "by_block_h"
    "by_block_h": {
        256: {"ROWS": 8, "num_warps": 4, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        512: {"ROWS": 4, "num_warps": 4, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        1024: {"ROWS": 2, "num_warps": 4, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        2048: {"ROWS": 1, "num_warps": 4, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        4096: {"ROWS": 1, "num_warps": 8, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        8192: {"ROWS": 1, "num_warps": 16, "PERSISTENT": 0, "PROGRAMS_PER_SM": 2, "LOOP_STAGES": 1},
    },
    "decode_by_block_h": {
        256: {"ROWS": 8, "num_warps": 4, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        512: {"ROWS": 1, "num_warps": 1, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},  # r1w1: decode_probe, s11
        1024: {"ROWS": 2, "num_warps": 4, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        2048: {"ROWS": 1, "num_warps": 4, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1,
               "small_t_num_warps": 8},
        4096: {"ROWS": 1, "num_warps": 8, "PERSISTENT": 0, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 1},
        8192: {"ROWS": 1, "num_warps": 16, "PERSISTENT": 0, "PROGRAMS_PER_SM": 2, "LOOP_STAGES": 1},
    },
    # Decode calls of at most this many rows take their entry's small_t_num_warps where it has one: rows of
    # 1536 (BLOCK_H 2048) on 8 warps read 1.98 / 2.14 us at T = 16 / 64 against 2.12 / 2.22 on 4, but 2.45
    # against 2.38 at T = 256 (the variant `warps_double`, 2026-12-04, session 18). Session 19's run read 2.07 / 2.16
    # against 2.01 / 2.14 on 4 (the variant `before`): within the 7% one configuration spreads at 2 us
    # (benchmarks/results/h200.md), so kept, not claimed.
    "decode_small_t": 64,
    "even": 1,             # 0: masks on every load and store (the seed before 2026-12-04); no difference measured
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load, and lets the next
    # one start at once (gdc_launch_dependents), so a decode call's launch overlaps its neighbours' tails instead
    # of following them. On an H100 it was no faster on any hot shape in 9 paired rounds (session22_h100.md): off; the
    # H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"PERSISTENT": [0, 1], "LOOP_STAGES": [1, 2, 3], "even": [0, 1], "PDL": [0, 1]}


@triton.jit
def _load_rows(x_ptr, blk, T, H, stride_x_row, stride_x_col, ROWS: tl.constexpr, BLOCK_H: tl.constexpr,
               EVEN: tl.constexpr):
    """One block of ROWS rows whose whole width fits in BLOCK_H, in fp32, with its row offsets and mask."""
    rows = blk * ROWS + tl.arange(0, ROWS)
    rows64 = rows.to(tl.int64)  # T * stride can pass 2^31 elements on large prefill batches
    cols = tl.arange(0, BLOCK_H)
    mask = (rows < T)[:, None] & (cols < H)[None, :]
    ptrs = x_ptr + rows64[:, None] * stride_x_row + cols[None, :] * stride_x_col
    if EVEN:        # one row, H == BLOCK_H: nothing out of bounds
        x = tl.load(ptrs, eviction_policy="evict_first").to(tl.float32)
    else:
        x = tl.load(ptrs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    return x, rows64, mask


@triton.jit
def _load_weight(w_ptr, H, stride_w, BLOCK_H: tl.constexpr, EVEN: tl.constexpr):
    cols = tl.arange(0, BLOCK_H)
    if EVEN:
        return tl.load(w_ptr + cols * stride_w, eviction_policy="evict_last").to(tl.float32)
    return tl.load(w_ptr + cols * stride_w, mask=cols < H, other=0.0, eviction_policy="evict_last").to(tl.float32)


@triton.jit
def _store_normalized(y_ptr, x, w, rows64, mask, H, stride_y_row, eps, BLOCK_H: tl.constexpr, EVEN: tl.constexpr):
    """y = x * rstd(x) * w for a block from _load_rows; w is the weight, already in fp32."""
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / H + eps)
    y = x * rstd[:, None] * w[None, :]
    cols = tl.arange(0, BLOCK_H)
    ptrs = y_ptr + rows64[:, None] * stride_y_row + cols[None, :]
    if EVEN:
        tl.store(ptrs, y.to(y_ptr.dtype.element_ty))
    else:
        tl.store(ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, T, H, stride_x_row, stride_x_col, stride_w, stride_y_row, eps,
                     ROWS: tl.constexpr, BLOCK_H: tl.constexpr, NUM_CHUNKS: tl.constexpr,
                     PERSISTENT: tl.constexpr, LOOP_STAGES: tl.constexpr, EVEN: tl.constexpr,
                     USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    cols = tl.arange(0, BLOCK_H)
    if NUM_CHUNKS == 1:
        # Whole row in registers: one read of x, one write of y.
        if PERSISTENT:
            w = _load_weight(w_ptr, H, stride_w, BLOCK_H, EVEN)
            for blk in tl.range(tl.program_id(0), tl.cdiv(T, ROWS), tl.num_programs(0), num_stages=LOOP_STAGES):
                x, rows64, mask = _load_rows(x_ptr, blk, T, H, stride_x_row, stride_x_col, ROWS, BLOCK_H, EVEN)
                _store_normalized(y_ptr, x, w, rows64, mask, H, stride_y_row, eps, BLOCK_H, EVEN)
        else:
            # x before w: the weight's layout conversion (through shared memory, behind a barrier) waits for
            # its load; issued first, it held back the x load by one DRAM round trip on the H = 512 tiles
            x, rows64, mask = _load_rows(x_ptr, tl.program_id(0), T, H, stride_x_row, stride_x_col, ROWS, BLOCK_H,
                                         EVEN)
            w = _load_weight(w_ptr, H, stride_w, BLOCK_H, EVEN)
            _store_normalized(y_ptr, x, w, rows64, mask, H, stride_y_row, eps, BLOCK_H, EVEN)
    else:
        # Rows too wide for registers: accumulate the sum of squares in fp32, then normalize chunk by chunk.
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        row_mask = rows < T
        rows64 = rows.to(tl.int64)
        x_rows = x_ptr + rows64[:, None] * stride_x_row
        y_rows = y_ptr + rows64[:, None] * stride_y_row
        acc = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            mask = row_mask[:, None] & (cc < H)[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.rsqrt(tl.sum(acc, axis=1) / H + eps)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_H + cols
            col_mask = cc < H
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cc[None, :] * stride_x_col, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cc * stride_w, mask=col_mask, other=0.0).to(tl.float32)
            y = x * rstd[:, None] * w[None, :]
            tl.store(y_rows + cc[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _sm_count(x) -> int:
    if not x.is_cuda:
        return 132          # the interpreter: an H200's count, so the persistent loop runs as it would there
    return torch.cuda.get_device_properties(x.device).multi_processor_count


def _pdl(x) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and x.is_cuda and torch.cuda.get_device_capability(x.device)[0] >= 9


def _config(T: int, block_h: int) -> dict:
    table = CONFIGS["decode_by_block_h"] if T <= CONFIGS["decode_max_t"] else CONFIGS["by_block_h"]
    fitting = [k for k in sorted(table) if k >= block_h]
    cfg = dict(table[fitting[0] if fitting else max(table)])
    if T <= CONFIGS["decode_small_t"] and "small_t_num_warps" in cfg:
        cfg["num_warps"] = cfg["small_t_num_warps"]
    return cfg


def rms_norm(x, weight, eps=1e-6):
    if x.dim() != 2 or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"rms_norm expects x[T,H] and weight[H]; got x {tuple(x.shape)}, weight {tuple(weight.shape)}")
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    if T == 0 or H == 0:
        return y
    block_h = min(triton.next_power_of_2(H), CONFIGS["max_block_h"])
    num_chunks = triton.cdiv(H, block_h)
    cfg = _config(T, block_h)
    blocks = triton.cdiv(T, cfg["ROWS"])
    persistent = int(bool(cfg["PERSISTENT"]) and num_chunks == 1)
    if persistent:
        grid = (max(1, min(blocks, _sm_count(x) * cfg["PROGRAMS_PER_SM"])),)
    else:
        grid = (blocks,)
    pdl = _pdl(x)
    _rms_norm_kernel[grid](x, weight, y, T, H, x.stride(0), x.stride(1), weight.stride(0), y.stride(0), eps,
                           ROWS=cfg["ROWS"], BLOCK_H=block_h, NUM_CHUNKS=num_chunks, PERSISTENT=persistent,
                           LOOP_STAGES=cfg["LOOP_STAGES"] if persistent else 1,
                           EVEN=int(bool(CONFIGS["even"]) and cfg["ROWS"] == 1 and H == block_h),
                           USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return y
