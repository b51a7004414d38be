"""Seed kernel for gemm(a[M,K], b[N,K]) -> a @ b.T: a tiled tl.dot matmul with an fp32 accumulator.

One program computes one BLOCK_M x BLOCK_N tile of the output, walking K in BLOCK_K steps. Programs
are numbered in groups of GROUP_M tile rows so that consecutive programs share the same b tiles (and
a tiles) while they are still in L2. The tile shape comes from CONFIGS by the size of M:
- decode (M <= 64) is memory-bound: the weight b is streamed once, so tiles are thin in M, narrow in N
  (many programs, one per slice of b) and deep in K (few, long loads kept in flight by num_stages);
- prefill is compute-bound: 128x128 tiles, 5 stages (bf16 tl.dot compiles to Hopper wgmma).
Ragged edges: rows and columns past M or N are clamped into range for the loads (their results are
never stored), and the K tail is masked unless K is a multiple of BLOCK_K.
"""
import torch
import triton
import triton.language as tl

# Tile configuration by the number of rows M: the first bucket whose bound is >= M is used.
# "min_programs": if the grid has fewer programs than this (most of an H200's 132 SMs), BLOCK_N
# and then BLOCK_M are halved (not below "min_block") so that every SM has a tile to work on.
CONFIGS = {
    "buckets": [
        (16, dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=256, GROUP_M=1, num_warps=4, num_stages=4)),
        (32, dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4)),
        (64, dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4)),
        (128, dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4)),
        # M >= 256: the best of a 48-config sweep on the H200 (agent/studies/config_sweep.py,
        # 2026-11-29): 128x128x64, 4 warps, 5 stages: 56.9 us at M256-N7168-K8192 (the first seed's
        # 128x64 tiles, 8 warps: 72.8 us) and 1727 us at M8192-N7168-K8192 (its 128x256x64, 8 warps,
        # 3 stages: 1808 us). torch.matmul (cuBLAS) took 44.5 and 1420 us in the same run.
        (1 << 62, dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=5)),
    ],
    "min_programs": 100,
    "min_block": {"BLOCK_M": 64, "BLOCK_N": 16},
}


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                 stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    # Grouped order: GROUP_M tile rows sweep all tile columns together, so a column of b tiles is
    # fetched from DRAM once per group instead of once per tile row.
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Clamped rows/columns load valid memory without a mask; their outputs are masked at the store.
    rows = (offs_m % M).to(tl.int64)
    cols = (offs_n % N).to(tl.int64)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + cols[None, :] * stride_bn + offs_k[:, None] * stride_bk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def _pick_config(M: int, N: int) -> dict:
    cfg = dict(CONFIGS["buckets"][-1][1])
    for bound, bucket in CONFIGS["buckets"]:
        if M <= bound:
            cfg = dict(bucket)
            break
    floor_m, floor_n = CONFIGS["min_block"]["BLOCK_M"], CONFIGS["min_block"]["BLOCK_N"]
    # Narrow N down to 64 first (keeps wgmma-sized tiles), then M, then N down to the floor.
    while triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]) < CONFIGS["min_programs"]:
        if cfg["BLOCK_N"] > 64:
            cfg["BLOCK_N"] //= 2
        elif cfg["BLOCK_M"] > floor_m:
            cfg["BLOCK_M"] //= 2
        elif cfg["BLOCK_N"] > floor_n:
            cfg["BLOCK_N"] //= 2
        else:
            break
    return cfg


def gemm(a, b):
    M, K = a.shape
    N, K_b = b.shape
    if K_b != K:
        raise ValueError(f"gemm: a is [M={M}, K={K}] but b is [N={N}, K={K_b}]; b must be [N, K] (nn.Linear layout)")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    cfg = _pick_config(M, N)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _gemm_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"],
        EVEN_K=K % cfg["BLOCK_K"] == 0,
        # fp32 operands get true fp32 products; TF32 would fail the fp32 tolerance.
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    return c
