"""Seed rotary embedding: one launch rotates q and k, each program one token and a block of heads.

Grid (T, query-head blocks + key-head blocks): a program first loads its token's cos/sin row once (the
cache row is shared by every head of the token, so it comes from DRAM once and from L2 after), then rotates
BLOCK_H heads of q or of k as [BLOCK_H, D/2] tiles of pair members a and b. IS_NEOX, a constexpr set from the
call's neox argument, picks the pairing: rotate-half (a = i, b = i + D/2) or GPT-J interleaved (a = 2i,
b = 2i + 1; strided loads of every other channel). Math in fp32, one rounding on the store. No host
synchronization.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_HALF (D/2 rounded up to a power of two; larger sizes use the largest key):
# heads per program and warps. Each entry keeps about 8 elements of each half per thread.
CONFIGS = {
    "by_block_half": {
        32: {"BLOCK_H": 16, "num_warps": 2},
        64: {"BLOCK_H": 16, "num_warps": 4},
        128: {"BLOCK_H": 8, "num_warps": 4},
    },
}


@triton.jit
def _rotate_heads(x_row, o_row, head0, H, c, s, i, i_mask, HEAD: tl.constexpr, HALF: tl.constexpr,
                  BLOCK_H: tl.constexpr, IS_NEOX: tl.constexpr):
    heads = head0 + tl.arange(0, BLOCK_H)
    mask = (heads < H)[:, None] & i_mask[None, :]
    if IS_NEOX:
        col_a = i
        col_b = i + HALF
    else:
        col_a = 2 * i
        col_b = 2 * i + 1
    base = heads[:, None] * HEAD
    xa = tl.load(x_row + base + col_a[None, :], mask=mask, other=0.0).to(tl.float32)
    xb = tl.load(x_row + base + col_b[None, :], mask=mask, other=0.0).to(tl.float32)
    oa = xa * c[None, :] - xb * s[None, :]
    ob = xb * c[None, :] + xa * s[None, :]
    tl.store(o_row + base + col_a[None, :], oa.to(o_row.dtype.element_ty), mask=mask)
    tl.store(o_row + base + col_b[None, :], ob.to(o_row.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_embedding_kernel(q_ptr, k_ptr, pos_ptr, cache_ptr, qo_ptr, ko_ptr, HQ, HK, Q_BLOCKS,
                             stride_q, stride_k, stride_cache, stride_qo, stride_ko,
                             HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_H: tl.constexpr,
                             IS_NEOX: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    i = tl.arange(0, BLOCK_HALF)
    i_mask = i < HALF
    cache_row = cache_ptr + pos * stride_cache
    c = tl.load(cache_row + i, mask=i_mask, other=0.0, eviction_policy="evict_last")
    s = tl.load(cache_row + HALF + i, mask=i_mask, other=0.0, eviction_policy="evict_last")
    if hb < Q_BLOCKS:
        _rotate_heads(q_ptr + t * stride_q, qo_ptr + t * stride_qo, hb * BLOCK_H, HQ, c, s, i, i_mask,
                      2 * HALF, HALF, BLOCK_H, IS_NEOX)
    else:
        _rotate_heads(k_ptr + t * stride_k, ko_ptr + t * stride_ko, (hb - Q_BLOCKS) * BLOCK_H, HK, c, s, i,
                      i_mask, 2 * HALF, HALF, BLOCK_H, IS_NEOX)


def _config(block_half: int) -> dict:
    table = CONFIGS["by_block_half"]
    fitting = [key for key in sorted(table) if key >= block_half]
    return table[fitting[0] if fitting else max(table)]


def rotary_embedding(q, k, positions, cos_sin_cache, neox=True):
    if q.dim() != 2 or k.dim() != 2 or positions.dim() != 1 or cos_sin_cache.dim() != 2 \
            or q.shape[0] != positions.shape[0] or k.shape[0] != positions.shape[0]:
        raise ValueError(f"rotary_embedding expects q[T,Hq*D], k[T,Hk*D], positions[T], cos_sin_cache[P,D]; got q "
                         f"{tuple(q.shape)}, k {tuple(k.shape)}, positions {tuple(positions.shape)}, "
                         f"cos_sin_cache {tuple(cos_sin_cache.shape)}")
    D = cos_sin_cache.shape[1]
    if D % 2 or q.shape[1] % D or k.shape[1] % D:
        raise ValueError(f"rotary_embedding: head size D={D} (the cache's width) must be even and divide q's width "
                         f"{q.shape[1]} and k's width {k.shape[1]}")
    if q.stride(1) != 1 or k.stride(1) != 1 or cos_sin_cache.stride(1) != 1:
        raise ValueError("rotary_embedding: q, k and cos_sin_cache need unit column stride (their rows may be strided)")
    T = q.shape[0]
    q_out = torch.empty((T, q.shape[1]), dtype=q.dtype, device=q.device)
    k_out = torch.empty((T, k.shape[1]), dtype=k.dtype, device=k.device)
    if T == 0:
        return q_out, k_out
    HQ, HK, half = q.shape[1] // D, k.shape[1] // D, D // 2
    block_half = triton.next_power_of_2(half)
    cfg = _config(block_half)
    block_h = min(cfg["BLOCK_H"], triton.next_power_of_2(max(HQ, HK)))
    q_blocks = triton.cdiv(HQ, block_h)
    grid = (T, q_blocks + triton.cdiv(HK, block_h))
    _rotary_embedding_kernel[grid](q, k, positions, cos_sin_cache, q_out, k_out, HQ, HK, q_blocks,
                                   q.stride(0), k.stride(0), cos_sin_cache.stride(0), q_out.stride(0),
                                   k_out.stride(0), HALF=half, BLOCK_HALF=block_half, BLOCK_H=block_h,
                                   IS_NEOX=bool(neox), num_warps=cfg["num_warps"])
    return q_out, k_out
