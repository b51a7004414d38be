"""Seed SiLU-and-multiply: out = silu(gate) * up, gate = x[:, :I], up = x[:, I:]; math in fp32.

Memory-bound and elementwise: every output element reads its gate and up value once and is stored
once. Four launch shapes, chosen per size bucket by the constexpr switch FLAT:
- FLAT=1: a 1-D grid over all T*I outputs, BLOCK per program; row and column come from one integer
  division by I (for I a multiple of 16 the compiler still proves 16-element runs contiguous, so the
  loads stay 16-byte vectors). Every program is full except the last, whatever T and I are: the shape
  Inductor's pointwise kernels take, which read 1.97-2.9 us on decode shapes where the 2-D grid took
  2.6-4.3 us (H200, 2026-11-29).
- FLAT=0: the earlier 2-D grid, [ROWS, BLOCK_I] tiles (row blocks on axis 0, column blocks on axis 1),
  kept so that no bucket has to get slower than it was.
- FLAT=2: one program a row (_silu_and_mul_row_kernel), the row's width a compile-time constant, so a
  power-of-two I needs no masks and no division: the shape of the one-row kernels that were 0.05-0.15 us
  ahead of the flat launch on I = 256 decode shapes (agent/studies/decode_probe.py, H200, 2026-12-02). Only
  for rows up to CONFIGS["max_row_i"] wide with unit column stride; other calls in such a bucket go FLAT=1
  (at I = 3584 one program a row took 2.6-11 us against the flat launch's 2.2).
- FLAT=3: the flat launch over a contiguous x with I a compile-time constant (_silu_and_mul_flat_kernel):
  row and column by a constant divisor (a multiply and shift, not a division), the gate's offset
  row * 2I + col in int32, no masks when BLOCK divides T*I, and no eviction hint (CONFIGS["flat_evict"]): the
  kernel torch.compile generates for this operator with static shapes, whose prefill calls were 2-4% ahead of
  FLAT=1 (H200, 2026-12-04: 84.05 us against 86.57 at T8192-I7168; ncu: 88.5% of DRAM bandwidth against
  82.6%). The hint, not the constant width, made that gap (see flat_evict). One compilation per distinct I (a
  model has a few); calls it does not apply to (x not contiguous, 2*T*I >= 2^31) take FLAT=1.
One launch per call and no host synchronization, so the call can be captured in a CUDA graph.
"""
import torch
import triton
import triton.language as tl

# Launch by the number of outputs T*I: the first bucket whose bound is >= T*I. FLAT=1 entries give
# BLOCK and num_warps; FLAT=0 entries take their tile from "by_block_i" (keyed by I rounded up to a
# power of two, capped at max_block_i; sizes above the largest key use the largest key's entry).
# agent/studies/measure_baselines.py times the switches per shape (benchmarks/results/h200.md).
CONFIGS = {
    "by_outputs": [
        # decode, I=256: one row a program on 4 warps, 1.71 / 1.80 / 1.96 us at T16 / T64 / T256 against the
        # flat launch's 1.84 / 2.00 / 2.14 and 2 warps' 1.73 / 1.81 / 2.04 (variants small_flat, small_row_w4;
        # H200, 2026-12-04). Calls it does not apply to take the flat launch: 4-16 programs of 8 per thread.
        (1 << 16, dict(FLAT=2, BLOCK=1024, num_warps=4, row_num_warps=4)),
        # decode, I=3584: 56-896 programs; the constant-width flat kernel read 2.27 / 3.44 us at T64 / T256
        # against FLAT=1's 2.38 / 3.66 (variant runtime_i, H200, 2026-12-04)
        (1 << 21, dict(FLAT=3, BLOCK=1024, num_warps=4)),
        # prefill: 8 per thread, 44.85 / 23.80 / 86.75 us at T8192-I3584 / T4096-I3584 / T8192-I7168 against
        # 16 per thread's 45.42 / 24.20 / 87.72 (variant flat1024w4, same run)
        (1 << 62, dict(FLAT=3, BLOCK=1024, num_warps=4)),
    ],
    "max_block_i": 2048,
    "max_row_i": 512,      # FLAT=2 only up to this row width
    # FLAT=3's load hint: none, as torch.compile's kernel. evict_first read 86.79 / 44.82 us at T8192-I7168 /
    # T8192-I3584 against 83.94 / 44.11 without (torch.compile 83.99 / 44.11; H200, 2026-12-04,
    # h200_records/s19_silu_evict_run.md, where the seed had the hint and the variant const_i_no_evict did not;
    # now const_i_evict_first is the other way round); decode within noise
    "flat_evict": "",
    "by_block_i": {
        128: {"ROWS": 16, "num_warps": 4},
        256: {"ROWS": 8, "num_warps": 4},
        512: {"ROWS": 4, "num_warps": 4},
        1024: {"ROWS": 2, "num_warps": 4},
        2048: {"ROWS": 1, "num_warps": 4},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): each kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents): a decode call's launch overlaps its neighbours' tails. On an H100 it was no
    # faster on any hot shape in 9 paired rounds (session22_h100.md): off; the H200 has not timed it (the variant
    # `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"FLAT": [0, 1, 2, 3], "flat_evict": ["evict_first", ""], "PDL": [0, 1]}


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, T, I, stride_x_row, stride_x_col, stride_out_row,
                         FLAT: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr, BLOCK_I: tl.constexpr,
                         USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    if FLAT:
        # int32 index (the launcher takes this path only for T*I < 2^31); int64 for the row offsets.
        idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = idx < T * I
        rows = (idx // I).to(tl.int64)
        cols = idx % I
        gate_ptrs = x_ptr + rows * stride_x_row + cols * stride_x_col
        out_ptrs = out_ptr + rows * stride_out_row + cols
    else:
        r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        c = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
        mask = (r < T)[:, None] & (c < I)[None, :]
        r64 = r.to(tl.int64)  # T * stride can pass 2^31 elements on large prefill batches
        gate_ptrs = x_ptr + r64[:, None] * stride_x_row + c[None, :] * stride_x_col
        out_ptrs = out_ptr + r64[:, None] * stride_out_row + c[None, :]
    gate = tl.load(gate_ptrs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    up = tl.load(gate_ptrs + I * stride_x_col, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    # silu(a) = a / (1 + exp(-a)): outlier gates reach a ~ -400, where exp(400) is inf in fp32 and the
    # quotient is the exact limit -0 (no NaN: a / inf).
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_and_mul_row_kernel(x_ptr, out_ptr, stride_x_row, stride_out_row, I: tl.constexpr,
                             BLOCK_I: tl.constexpr, WIDE: tl.constexpr, USE_PDL: tl.constexpr = False):
    """One row a program, unit column stride. WIDE: the row offsets need int64 (T * stride >= 2^31)."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    if WIDE:
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK_I)
    gate_ptrs = x_ptr + row * stride_x_row + cols
    out_ptrs = out_ptr + row * stride_out_row + cols
    if BLOCK_I == I:
        gate = tl.load(gate_ptrs, eviction_policy="evict_first").to(tl.float32)
        up = tl.load(gate_ptrs + I, eviction_policy="evict_first").to(tl.float32)
    else:
        gate = tl.load(gate_ptrs, mask=cols < I, other=0.0, eviction_policy="evict_first").to(tl.float32)
        up = tl.load(gate_ptrs + I, mask=cols < I, other=0.0, eviction_policy="evict_first").to(tl.float32)
    out = (gate / (1.0 + tl.exp(-gate)) * up).to(out_ptr.dtype.element_ty)    # as above: -0 at a ~ -400
    if BLOCK_I == I:
        tl.store(out_ptrs, out)
    else:
        tl.store(out_ptrs, out, mask=cols < I)


@triton.jit
def _silu_and_mul_flat_kernel(x_ptr, out_ptr, n, I: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr,
                              EVICT: tl.constexpr, USE_PDL: tl.constexpr = False):
    """FLAT=3: x contiguous [T, 2I], out contiguous [T, I], 2 * T * I < 2^31 (int32 offsets); EVEN: BLOCK divides
    n = T * I, so every program is full. EVICT: "evict_first" or "" (no hint) on the loads."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    src = (idx // I) * (2 * I) + idx % I
    if EVEN:
        gate = tl.load(x_ptr + src, eviction_policy=EVICT).to(tl.float32)
        up = tl.load(x_ptr + src + I, eviction_policy=EVICT).to(tl.float32)
    else:
        gate = tl.load(x_ptr + src, mask=idx < n, other=0.0, eviction_policy=EVICT).to(tl.float32)
        up = tl.load(x_ptr + src + I, mask=idx < n, other=0.0, eviction_policy=EVICT).to(tl.float32)
    out = (gate / (1.0 + tl.exp(-gate)) * up).to(out_ptr.dtype.element_ty)    # as above: -0 at a ~ -400
    if EVEN:
        tl.store(out_ptr + idx, out)
    else:
        tl.store(out_ptr + idx, out, mask=idx < n)


def _launch(T: int, I: int, col_stride: int = 1, contiguous: bool = True) -> dict:
    n = T * I
    launch = dict(CONFIGS["by_outputs"][-1][1])
    for bound, cfg in CONFIGS["by_outputs"]:
        if n <= bound:
            launch = dict(cfg)
            break
    if launch["FLAT"] == 2:
        if I <= CONFIGS["max_row_i"] and col_stride == 1:
            return dict(launch, BLOCK_I=triton.next_power_of_2(I), num_warps=launch.get("row_num_warps", launch["num_warps"]))
        launch["FLAT"] = 1
    if launch["FLAT"] == 3:
        if contiguous and 2 * n < 1 << 31:
            return dict(launch, EVEN=int(n % launch["BLOCK"] == 0))
        launch["FLAT"] = 1
    if n >= 1 << 31:
        launch["FLAT"] = 0               # the flat index is int32
    if launch["FLAT"]:
        launch.update(ROWS=1, BLOCK_I=1)      # unused by the flat path: one specialization per BLOCK
        return launch
    block_i = min(triton.next_power_of_2(I), CONFIGS["max_block_i"])
    table = CONFIGS["by_block_i"]
    fitting = [k for k in sorted(table) if k >= block_i]
    tile = table[fitting[0] if fitting else max(table)]
    launch.update(BLOCK=1, ROWS=tile["ROWS"], BLOCK_I=block_i, num_warps=tile["num_warps"])
    return launch


def _pdl(x) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and x.is_cuda and torch.cuda.get_device_capability(x.device)[0] >= 9


def silu_and_mul(x):
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"silu_and_mul expects x[T, 2*I] with an even last dimension; got {tuple(x.shape)}")
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), dtype=x.dtype, device=x.device)
    if T == 0 or I == 0:
        return out
    cfg = _launch(T, I, x.stride(1), x.is_contiguous())
    pdl = _pdl(x)
    if cfg["FLAT"] == 3:
        _silu_and_mul_flat_kernel[(triton.cdiv(T * I, cfg["BLOCK"]),)](x, out, T * I, I=I, BLOCK=cfg["BLOCK"],
                                                                      EVEN=cfg["EVEN"], EVICT=CONFIGS["flat_evict"],
                                                                      USE_PDL=pdl, launch_pdl=pdl,
                                                                      num_warps=cfg["num_warps"])
        return out
    if cfg["FLAT"] == 2:
        wide = max(T * x.stride(0), T * I) >= 1 << 31
        _silu_and_mul_row_kernel[(T,)](x, out, x.stride(0), out.stride(0), I=I, BLOCK_I=cfg["BLOCK_I"], WIDE=wide,
                                       USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
        return out
    if cfg["FLAT"]:
        grid = (triton.cdiv(T * I, cfg["BLOCK"]),)
    else:
        grid = (triton.cdiv(T, cfg["ROWS"]), triton.cdiv(I, cfg["BLOCK_I"]))
    _silu_and_mul_kernel[grid](x, out, T, I, x.stride(0), x.stride(1), out.stride(0), FLAT=cfg["FLAT"],
                               BLOCK=cfg["BLOCK"], ROWS=cfg["ROWS"], BLOCK_I=cfg["BLOCK_I"], USE_PDL=pdl,
                               launch_pdl=pdl, num_warps=cfg["num_warps"])
    return out
