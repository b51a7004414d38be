"""Seed rotary embedding: one launch rotates q and k.

Two code paths, picked per table entry by the constexpr-level switch FUSED:
- FUSED=1 (the default): grid (T / TOKENS,). One program rotates TOKENS whole tokens, every query head and
  every key head, as [TOKENS, heads, D/2] tiles (heads padded to a power of two and masked), so a token's
  cos/sin row is loaded once for all of its heads. q and k are loaded before the cos/sin rows: those wait on
  positions[t] (a dependent load), q and k do not, so their latency overlaps the positions load.
- FUSED=0 (the earlier seed, variant `two_programs`): grid (T, query-head blocks + key-head blocks), a program
  rotates BLOCK_H heads of q or of k. With a GQA model's Hk = 1 that is two programs a token, the key one doing
  1/Hq of the work, and both reload the cos/sin row.
Tokens up to CONFIGS["decode_max_t"] take the decode table (by_block_half), more the prefill table.
IS_NEOX, a constexpr set from the call's neox argument, picks the pairing: rotate-half (a = i, b = i + D/2)
or GPT-J interleaved (a = 2i, b = 2i + 1; strided loads of every other channel). Math in fp32, one rounding
on the store. No host synchronization.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_HALF (D/2 rounded up to a power of two; larger sizes use the largest key).
# FUSED entries size TOKENS and num_warps so a thread holds about 8 elements of each half of q (one 16-byte
# bf16 vector: D = 128, Hq = 8 is 512 elements a token). Decode (T <= 256, at most 2 programs per SM) is
# latency-bound: one token a program, the most programs. Prefill (T = 8192 moves 42 MB, 8.7 us at 4.8 TB/s)
# is bandwidth-bound; at D = 128 one token a program and 2 warps timed fastest of the variants on the H200 at
# T = 4096 and 8192 (session 12, after sin's load moved ahead of cos's broadcast): 7.33 and 12.99 us, against
# 7.89 and 13.12 for 4 tokens and 8 warps; one token needs no layout conversion (no barrier) at all.
# BLOCK_H is the head block of FUSED=0 and of tokens whose heads do not fit max_fused_tile.
CONFIGS = {
    "decode_max_t": 256,
    # the fused kernel's hint on its q and k loads: "evict_first" (x is streamed once) or "" (none). silu_and_mul's
    # flat kernel read 0.97 of its prefill time without it; here none read 1.00-1.01 at prefill and 0.96-0.98 at
    # decode, within noise (variant no_evict, since retired; H200, 2026-12-04, new_ops_h200.md session 19)
    "x_evict": "evict_first",
    "max_fused_tile": 4096,     # a power of two: fused only while TOKENS * padded heads * BLOCK_HALF fits
    "by_block_half": {
        32: {"BLOCK_H": 16, "num_warps": 2, "FUSED": 1, "TOKENS": 1},
        64: {"BLOCK_H": 16, "num_warps": 4, "FUSED": 1, "TOKENS": 1},
        128: {"BLOCK_H": 8, "num_warps": 4, "FUSED": 1, "TOKENS": 1},
    },
    "prefill_by_block_half": {
        32: {"BLOCK_H": 16, "num_warps": 4, "FUSED": 1, "TOKENS": 4},
        64: {"BLOCK_H": 16, "num_warps": 2, "FUSED": 1, "TOKENS": 1},
        128: {"BLOCK_H": 8, "num_warps": 8, "FUSED": 1, "TOKENS": 2},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.99-1.04 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"FUSED": [0, 1], "TOKENS": [1, 2, 4, 8], "x_evict": ["evict_first", ""], "PDL": [0, 1]}


@triton.jit
def _pair_cols(i, HALF: tl.constexpr, IS_NEOX: tl.constexpr):
    if IS_NEOX:
        return i, i + HALF
    return 2 * i, 2 * i + 1


@triton.jit
def _rotate_heads(x_row, o_row, head0, H, c, s, i, i_mask, HEAD: tl.constexpr, HALF: tl.constexpr,
                  BLOCK_H: tl.constexpr, IS_NEOX: tl.constexpr):
    heads = head0 + tl.arange(0, BLOCK_H)
    mask = (heads < H)[:, None] & i_mask[None, :]
    col_a, col_b = _pair_cols(i, HALF, IS_NEOX)
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
                             IS_NEOX: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
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


@triton.jit
def _token_tile(tok, t_mask, H, i, i_mask, HEAD: tl.constexpr, HALF: tl.constexpr, HEADS: tl.constexpr,
                IS_NEOX: tl.constexpr):
    """Offsets (within a token row) of pair members a and b of [TOKENS, HEADS, BLOCK_HALF], and its mask."""
    heads = tl.arange(0, HEADS)
    mask = t_mask[:, None, None] & (heads < H)[None, :, None] & i_mask[None, None, :]
    col_a, col_b = _pair_cols(i, HALF, IS_NEOX)
    base = (heads * HEAD)[None, :, None]
    return base + col_a[None, None, :], base + col_b[None, None, :], mask


@triton.jit
def _rotate_store(o_ptr, tok, stride_o, off_a, off_b, mask, xa, xb, c, s):
    row = o_ptr + (tok * stride_o)[:, None, None]
    tl.store(row + off_a, (xa * c - xb * s).to(o_ptr.dtype.element_ty), mask=mask)
    tl.store(row + off_b, (xb * c + xa * s).to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_embedding_fused_kernel(q_ptr, k_ptr, pos_ptr, cache_ptr, qo_ptr, ko_ptr, T, HQ, HK,
                                   stride_q, stride_k, stride_cache, stride_qo, stride_ko,
                                   HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, TOKENS: tl.constexpr,
                                   HEADS_Q: tl.constexpr, HEADS_K: tl.constexpr, IS_NEOX: tl.constexpr,
                                   X_EVICT: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    tok = (tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)).to(tl.int64)
    t_mask = tok < T
    pos = tl.load(pos_ptr + tok, mask=t_mask, other=0)
    i = tl.arange(0, BLOCK_HALF)
    i_mask = i < HALF
    # q and k first: their addresses do not wait on pos (streamed once: X_EVICT, evict_first or no hint)
    qa_off, qb_off, q_mask = _token_tile(tok, t_mask, HQ, i, i_mask, 2 * HALF, HALF, HEADS_Q, IS_NEOX)
    q_row = q_ptr + (tok * stride_q)[:, None, None]
    qa = tl.load(q_row + qa_off, mask=q_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
    qb = tl.load(q_row + qb_off, mask=q_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
    ka_off, kb_off, k_mask = _token_tile(tok, t_mask, HK, i, i_mask, 2 * HALF, HALF, HEADS_K, IS_NEOX)
    k_row = k_ptr + (tok * stride_k)[:, None, None]
    ka = tl.load(k_row + ka_off, mask=k_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
    kb = tl.load(k_row + kb_off, mask=k_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
    # one cos/sin row per token, broadcast over its heads
    cs_mask = t_mask[:, None] & i_mask[None, :]
    cache_row = cache_ptr + (pos.to(tl.int64) * stride_cache)[:, None] + i[None, :]
    c = tl.load(cache_row, mask=cs_mask, other=0.0)
    s = tl.load(cache_row + HALF, mask=cs_mask, other=0.0)
    # broadcast after both loads: the broadcast converts the layout behind a barrier, and a load written after
    # it (sin, when cos was broadcast first) issued only once cos had arrived: one more DRAM round trip
    c, s = c[:, None, :], s[:, None, :]
    _rotate_store(qo_ptr, tok, stride_qo, qa_off, qb_off, q_mask, qa, qb, c, s)
    _rotate_store(ko_ptr, tok, stride_ko, ka_off, kb_off, k_mask, ka, kb, c, s)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(T: int, block_half: int) -> dict:
    table = CONFIGS["by_block_half"] if T <= CONFIGS["decode_max_t"] else CONFIGS["prefill_by_block_half"]
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
    cfg = _config(T, block_half)
    strides = (q.stride(0), k.stride(0), cos_sin_cache.stride(0), q_out.stride(0), k_out.stride(0))
    heads_q, heads_k = triton.next_power_of_2(HQ), triton.next_power_of_2(HK)
    token_tile = max(heads_q, heads_k) * block_half
    pdl = _pdl(q)
    if cfg["FUSED"] and token_tile <= CONFIGS["max_fused_tile"]:
        tokens = min(cfg["TOKENS"], triton.next_power_of_2(T), CONFIGS["max_fused_tile"] // token_tile)
        _rotary_embedding_fused_kernel[(triton.cdiv(T, tokens),)](
            q, k, positions, cos_sin_cache, q_out, k_out, T, HQ, HK, *strides, HALF=half, BLOCK_HALF=block_half,
            TOKENS=tokens, HEADS_Q=heads_q, HEADS_K=heads_k, IS_NEOX=bool(neox), X_EVICT=CONFIGS["x_evict"],
            USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
        return q_out, k_out
    block_h = min(cfg["BLOCK_H"], triton.next_power_of_2(max(HQ, HK)))
    q_blocks = triton.cdiv(HQ, block_h)
    grid = (T, q_blocks + triton.cdiv(HK, block_h))
    _rotary_embedding_kernel[grid](q, k, positions, cos_sin_cache, q_out, k_out, HQ, HK, q_blocks, *strides,
                                   HALF=half, BLOCK_HALF=block_half, BLOCK_H=block_h, IS_NEOX=bool(neox),
                                   USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return q_out, k_out
