"""Seed kernel for gemm(a[M,K], b[N,K]) -> a @ b.T: a tiled tl.dot matmul with an fp32 accumulator.

One program computes one BLOCK_M x BLOCK_N tile of the output (or one K-slice of it), walking K in
BLOCK_K steps. Tiles are numbered in groups of GROUP_M tile rows so that consecutive tiles share b
tiles (and a tiles) while they are still in L2. The tile comes from CONFIGS by the size of M:
- decode (M <= 64) is memory-bound: the weight b is streamed once, so tiles are thin in M, narrow in N
  (many programs, one per slice of b) and deep in K (few, long loads kept in flight by num_stages);
- prefill is compute-bound: 128x128 tiles, 5 stages (bf16 tl.dot compiles to Hopper wgmma).
Structural switches per bucket (constexpr), each with the earlier seed's path as the value 0/1:
- TMA=1 loads a and b tiles through host-built tensor descriptors (Hopper's bulk tensor copy engine,
  out-of-bounds rows and K tails filled with zeros) and stores c the same way; TMA=0 uses pointer
  loads. Falls back to pointers when a row stride is not a multiple of 16 bytes (TMA's rule).
- PERSISTENT=1 launches one program per SM that loops over the tiles (WARP_SPECIALIZE=1 asks the
  compiler to split producer and consumer warps in that loop; FLATTEN=1 lets it pipeline across tiles);
  PERSISTENT=0 launches one program per tile.
- SPLIT_K > 1 splits K among programs (more loads in flight when M is small and N has few tiles):
  partial sums go to an fp32 workspace and a second small kernel adds them and rounds once.
Ragged edges: with pointers, rows and columns past M or N are clamped into range for the loads (their
results are never stored) and the K tail is masked unless K is a multiple of BLOCK_K * SPLIT_K.
"""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# Tile configuration by the number of rows M: the first bucket whose bound is >= M is used.
# "min_programs": if the grid has fewer programs than this (most of an H200's 132 SMs), BLOCK_N
# and then BLOCK_M are halved (not below "min_block") so that every SM has a tile to work on.
CONFIGS = {
    "buckets": [
        (16, dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=256, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0,
                  WARP_SPECIALIZE=0, FLATTEN=0, num_warps=4, num_stages=4)),
        (32, dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0,
                  WARP_SPECIALIZE=0, FLATTEN=0, num_warps=4, num_stages=4)),
        (64, dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0,
                  WARP_SPECIALIZE=0, FLATTEN=0, num_warps=4, num_stages=4)),
        (128, dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=0, PERSISTENT=0,
                   WARP_SPECIALIZE=0, FLATTEN=0, num_warps=4, num_stages=4)),
        # 128 < M <= 256: 128x128x64, 4 warps, 5 stages (the best of a 48-config sweep, 2026-11-29) with
        # TMA loads: 52.1 us at M256-N7168-K8192 against 56.8 with pointer loads (the variant sweep of
        # agent/studies/measure_baselines.py on the H200, 2026-12-01; cuBLAS 45.0 in the same run).
        (256, dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0,
                   WARP_SPECIALIZE=0, FLATTEN=0, num_warps=4, num_stages=5)),
        # M > 256: persistent 128x256x64 tiles through TMA, 8 warps, 3 stages: 1363 us at M8192-N7168-K8192
        # against 1679 for the non-persistent 128x128 tiles, 622 vs 799 at M4096-N7168-K8192, 639 vs 842 at
        # M8192-N8192-K3584 (same sweep, same run; cuBLAS 1364, 624, 659).
        (1 << 62, dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=1,
                       WARP_SPECIALIZE=0, FLATTEN=1, num_warps=8, num_stages=3)),
    ],
    "min_programs": 100,
    "min_block": {"BLOCK_M": 64, "BLOCK_N": 16},
}
SEARCH_SPACE = {"TMA": [0, 1], "PERSISTENT": [0, 1], "WARP_SPECIALIZE": [0, 1], "FLATTEN": [0, 1],
                "SPLIT_K": [1, 2, 4, 8]}


@triton.jit
def _tile_coords(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
                 SPLIT_K: tl.constexpr):
    # Grouped order: GROUP_M tile rows sweep all tile columns together, so a column of b tiles is
    # fetched from DRAM once per group instead of once per tile row. The K-slice is the fastest index.
    split = tile % SPLIT_K
    t = tile // SPLIT_K
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    first_m = (t // per_group) * GROUP_M
    group_rows = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (t % per_group) % group_rows
    pid_n = (t % per_group) // group_rows
    return pid_m, pid_n, split


@triton.jit
def _gemm_tile(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, tile, M, N, K,
               stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr, SPLIT_K: tl.constexpr, TMA: tl.constexpr):
    pid_m, pid_n, split = _tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M, SPLIT_K)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_per = tl.cdiv(k_tiles, SPLIT_K)
    k_first = split * k_per
    k_last = tl.minimum(k_first + k_per, k_tiles)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA:
        m0 = pid_m * BLOCK_M
        n0 = pid_n * BLOCK_N
        for kt in range(k_first, k_last):
            a = a_desc.load([m0, kt * BLOCK_K])
            b = b_desc.load([n0, kt * BLOCK_K])
            acc = tl.dot(a, b.T, acc, input_precision=DOT_PRECISION)
    else:
        offs_k = k_first * BLOCK_K + tl.arange(0, BLOCK_K)
        # Clamped rows/columns load valid memory without a mask; their outputs are masked at the store.
        rows = (offs_m % M).to(tl.int64)
        cols = (offs_n % N).to(tl.int64)
        a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + cols[None, :] * stride_bn + offs_k[:, None] * stride_bk
        for kt in range(k_first, k_last):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                k_left = K - kt * BLOCK_K
                a = tl.load(a_ptrs, mask=tl.arange(0, BLOCK_K)[None, :] < k_left, other=0.0)
                b = tl.load(b_ptrs, mask=tl.arange(0, BLOCK_K)[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K > 1:
        # fp32 partial sums [SPLIT_K, M, N]; _gemm_splitk_reduce_kernel adds them and rounds once.
        ws = ws_ptr + split.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        tl.store(ws, acc, mask=c_mask)
    elif TMA:
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))
    else:
        c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, M, N, K,
                 stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr,
                 SPLIT_K: tl.constexpr, TMA: tl.constexpr, PERSISTENT: tl.constexpr,
                 WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr):
    if PERSISTENT:
        tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) * SPLIT_K
        for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=FLATTEN,
                             warp_specialize=WARP_SPECIALIZE):
            _gemm_tile(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, tile, M, N, K,
                       stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                       BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, DOT_PRECISION, SPLIT_K, TMA)
    else:
        _gemm_tile(a_ptr, b_ptr, c_ptr, a_desc, b_desc, c_desc, ws_ptr, tl.program_id(0), M, N, K,
                   stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                   BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, DOT_PRECISION, SPLIT_K, TMA)


@triton.jit
def _gemm_splitk_reduce_kernel(ws_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _pick_config(M: int, N: int) -> dict:
    cfg = dict(CONFIGS["buckets"][-1][1])
    for bound, bucket in CONFIGS["buckets"]:
        if M <= bound:
            cfg = dict(bucket)
            break
    floor_m, floor_n = CONFIGS["min_block"]["BLOCK_M"], CONFIGS["min_block"]["BLOCK_N"]
    # Narrow N down to 64 first (keeps wgmma-sized tiles), then M, then N down to the floor.
    while (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]) * cfg["SPLIT_K"]
           < CONFIGS["min_programs"]):
        if cfg["BLOCK_N"] > 64:
            cfg["BLOCK_N"] //= 2
        elif cfg["BLOCK_M"] > floor_m:
            cfg["BLOCK_M"] //= 2
        elif cfg["BLOCK_N"] > floor_n:
            cfg["BLOCK_N"] //= 2
        else:
            break
    return cfg


def _tma_ready(t) -> bool:
    """TMA's rule: 16-byte aligned base and row stride, unit inner stride."""
    size = t.element_size()
    return t.stride(1) == 1 and (t.stride(0) * size) % 16 == 0 and (t.storage_offset() * size) % 16 == 0


def _sm_count(t) -> int:
    if not t.is_cuda:
        return 132          # the interpreter: an H200's count, so the persistent loop runs as it would there
    return torch.cuda.get_device_properties(t.device).multi_processor_count


def gemm(a, b):
    M, K = a.shape
    N, K_b = b.shape
    if K_b != K:
        raise ValueError(f"gemm: a is [M={M}, K={K}] but b is [N={N}, K={K_b}]; b must be [N, K] (nn.Linear layout)")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    cfg = _pick_config(M, N)
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    split = max(1, min(cfg["SPLIT_K"], triton.cdiv(K, bk)))
    tma = bool(cfg["TMA"]) and _tma_ready(a) and _tma_ready(b) and _tma_ready(c)
    a_desc = b_desc = c_desc = ws = None
    if tma:
        a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
        b_desc = TensorDescriptor.from_tensor(b, [bn, bk])
        c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    if split > 1:
        ws = torch.empty((split, M, N), device=a.device, dtype=torch.float32)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn) * split
    grid = (min(tiles, _sm_count(a)) if cfg["PERSISTENT"] else tiles,)
    _gemm_kernel[grid](
        a, b, c, a_desc, b_desc, c_desc, ws, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"],
        EVEN_K=K % (bk * split) == 0,
        # fp32 operands get true fp32 products; TF32 would fail the fp32 tolerance.
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
        SPLIT_K=split, TMA=1 if tma else 0, PERSISTENT=int(bool(cfg["PERSISTENT"])),
        WARP_SPECIALIZE=int(bool(cfg["WARP_SPECIALIZE"]) and bool(cfg["PERSISTENT"])),
        FLATTEN=int(bool(cfg["FLATTEN"]) and bool(cfg["PERSISTENT"])),
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    if split > 1:
        block = 1024
        _gemm_splitk_reduce_kernel[(triton.cdiv(M * N, block),)](ws, c, M * N, SPLIT_K=split, BLOCK=block,
                                                                 num_warps=4)
    return c
