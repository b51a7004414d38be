"""Seed SiLU-and-multiply: out = silu(gate) * up, gate = x[:, :I], up = x[:, I:]; math in fp32.

Memory-bound and elementwise: every output element reads its gate and up value once and is stored
once. Two launch shapes, chosen per size bucket by the constexpr switch FLAT:
- FLAT=1: a 1-D grid over all T*I outputs, BLOCK per program; row and column come from one integer
  division by I (for I a multiple of 16 the compiler still proves 16-element runs contiguous, so the
  loads stay 16-byte vectors). Every program is full except the last, whatever T and I are: the shape
  Inductor's pointwise kernels take, which read 1.97-2.9 us on decode shapes where the 2-D grid took
  2.6-4.3 us (H200, 2026-11-29).
- FLAT=0: the earlier 2-D grid, [ROWS, BLOCK_I] tiles (row blocks on axis 0, column blocks on axis 1),
  kept so that no bucket has to get slower than it was.
One launch per call and no host synchronization, so the call can be captured in a CUDA graph.
"""
import torch
import triton
import triton.language as tl

# Launch by the number of outputs T*I: the first bucket whose bound is >= T*I. FLAT=1 entries give
# BLOCK and num_warps; FLAT=0 entries take their tile from "by_block_i" (keyed by I rounded up to a
# power of two, capped at max_block_i; sizes above the largest key use the largest key's entry).
# Defaults not yet timed on the H200: agent/studies/measure_baselines.py times both switches per shape.
CONFIGS = {
    "by_outputs": [
        (1 << 16, dict(FLAT=1, BLOCK=1024, num_warps=4)),      # decode, I=256: 4-16 programs of 8 per thread
        (1 << 21, dict(FLAT=1, BLOCK=1024, num_warps=4)),      # decode, I=3584: 56-896 programs
        (1 << 62, dict(FLAT=1, BLOCK=2048, num_warps=4)),      # prefill: 16 per thread
    ],
    "max_block_i": 2048,
    "by_block_i": {
        128: {"ROWS": 16, "num_warps": 4},
        256: {"ROWS": 8, "num_warps": 4},
        512: {"ROWS": 4, "num_warps": 4},
        1024: {"ROWS": 2, "num_warps": 4},
        2048: {"ROWS": 1, "num_warps": 4},
    },
}
SEARCH_SPACE = {"FLAT": [0, 1]}


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, T, I, stride_x_row, stride_x_col, stride_out_row,
                         FLAT: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr, BLOCK_I: tl.constexpr):
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


def _launch(T: int, I: int) -> dict:
    n = T * I
    launch = dict(CONFIGS["by_outputs"][-1][1])
    for bound, cfg in CONFIGS["by_outputs"]:
        if n <= bound:
            launch = dict(cfg)
            break
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


def silu_and_mul(x):
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"silu_and_mul expects x[T, 2*I] with an even last dimension; got {tuple(x.shape)}")
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), dtype=x.dtype, device=x.device)
    if T == 0 or I == 0:
        return out
    cfg = _launch(T, I)
    if cfg["FLAT"]:
        grid = (triton.cdiv(T * I, cfg["BLOCK"]),)
    else:
        grid = (triton.cdiv(T, cfg["ROWS"]), triton.cdiv(I, cfg["BLOCK_I"]))
    _silu_and_mul_kernel[grid](x, out, T, I, x.stride(0), x.stride(1), out.stride(0), FLAT=cfg["FLAT"],
                               BLOCK=cfg["BLOCK"], ROWS=cfg["ROWS"], BLOCK_I=cfg["BLOCK_I"], num_warps=cfg["num_warps"])
    return out
