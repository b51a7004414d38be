"""Seed per-head q/k RMSNorm: one launch for both tensors, each program one token and a block of heads.

Grid (T, query-head blocks + key-head blocks): a program normalizes BLOCK_H heads of q (with wq) or of k
(with wk) as a [BLOCK_H, BLOCK_D] tile, one sum of squares per head, so heads never mix. Rows are short
(D = 128 or 256), so a tile holds whole heads and x is read once. Strided q and k (views of a fused QKV
output) are read through their token and head strides. No host synchronization.

Structural switches (per table entry; 0 is the earlier seed):
- FUSED=1: grid (T / TOKENS,): one program normalizes TOKENS whole tokens, all of q's heads and all of k's
  (tiles [TOKENS * next_pow2(Hq), BLOCK_D] and [TOKENS * next_pow2(Hk), BLOCK_D], BLOCK_H unused). With
  FUSED=0 a key-head program of a GQA model (Hk = 1) is a [BLOCK_H, D] tile with one live head, and T = 8192
  launches 16384 programs of which half move 256 bytes; fused, each moves TOKENS * (Hq + Hk) heads.
- PRELOAD_W=1 issues the weight load before x's, so it overlaps x's latency instead of following the reduction.
Row counts up to CONFIGS["decode_max_t"] take the decode table (by_block_d), larger ones prefill_by_block_d.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_D (D rounded up to a power of two; larger sizes use the largest key): heads per
# program and warps, about 8-16 elements a thread.
# The prefill table runs one fused q+k program per 4 tokens with 8 warps: the variant `prefill_fused_t4_w8`,
# 12.7 / 8.1 us at T = 8192 / 4096 on the H200 (2026-12-02, benchmarks/results/new_ops_h200.md; from 15.5 / 8.7),
# 12.5 / 7.8 us once k's tile was loaded before q's stores (2026-12-03).
CONFIGS = {
    "decode_max_t": 256,
    "by_block_d": {
        64: {"BLOCK_H": 16, "num_warps": 2, "FUSED": 0, "TOKENS": 1, "PRELOAD_W": 0},
        128: {"BLOCK_H": 8, "num_warps": 4, "FUSED": 0, "TOKENS": 1, "PRELOAD_W": 0},
        256: {"BLOCK_H": 4, "num_warps": 4, "FUSED": 0, "TOKENS": 1, "PRELOAD_W": 0},
        512: {"BLOCK_H": 2, "num_warps": 4, "FUSED": 0, "TOKENS": 1, "PRELOAD_W": 0},
    },
    "prefill_by_block_d": {
        64: {"BLOCK_H": 16, "num_warps": 8, "FUSED": 1, "TOKENS": 4, "PRELOAD_W": 0},
        128: {"BLOCK_H": 8, "num_warps": 8, "FUSED": 1, "TOKENS": 4, "PRELOAD_W": 0},
        256: {"BLOCK_H": 4, "num_warps": 8, "FUSED": 1, "TOKENS": 4, "PRELOAD_W": 0},
        512: {"BLOCK_H": 2, "num_warps": 8, "FUSED": 1, "TOKENS": 4, "PRELOAD_W": 0},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.97-1.10 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"FUSED": [0, 1], "PRELOAD_W": [0, 1], "TOKENS": [1, 2, 4, 8], "PDL": [0, 1]}


@triton.jit
def _norm_heads(x_tok, o_tok, w_ptr, head0, H, D, stride_h, stride_oh, eps, BLOCK_H: tl.constexpr,
                BLOCK_D: tl.constexpr, PRELOAD_W: tl.constexpr):
    heads = head0 + tl.arange(0, BLOCK_H)
    cols = tl.arange(0, BLOCK_D)
    col_mask = cols < D
    mask = (heads < H)[:, None] & col_mask[None, :]
    if PRELOAD_W:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    x = tl.load(x_tok + heads[:, None] * stride_h + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    if not PRELOAD_W:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(o_tok + heads[:, None] * stride_oh + cols[None, :], y.to(o_tok.dtype.element_ty), mask=mask)


@triton.jit
def _qk_rms_norm_kernel(q_ptr, k_ptr, wq_ptr, wk_ptr, qo_ptr, ko_ptr, HQ, HK, D, Q_BLOCKS,
                        stride_qt, stride_qh, stride_kt, stride_kh, stride_qot, stride_qoh, stride_kot, stride_koh,
                        eps, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, PRELOAD_W: tl.constexpr,
                        USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    t = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    if hb < Q_BLOCKS:
        _norm_heads(q_ptr + t * stride_qt, qo_ptr + t * stride_qot, wq_ptr, hb * BLOCK_H, HQ, D, stride_qh,
                    stride_qoh, eps, BLOCK_H, BLOCK_D, PRELOAD_W)
    else:
        _norm_heads(k_ptr + t * stride_kt, ko_ptr + t * stride_kot, wk_ptr, (hb - Q_BLOCKS) * BLOCK_H, HK, D,
                    stride_kh, stride_koh, eps, BLOCK_H, BLOCK_D, PRELOAD_W)


@triton.jit
def _token_tile(tok0, T, H, col_mask, TOKENS: tl.constexpr, HEADS: tl.constexpr):
    """TOKENS tokens x HEADS (H rounded up) heads of one tensor as one [TOKENS * HEADS, BLOCK_D] tile: the
    tokens and heads of each row, and its mask."""
    r = tl.arange(0, TOKENS * HEADS)
    tok = (tok0 + r // HEADS).to(tl.int64)
    head = r % HEADS
    mask = ((tok < T) & (head < H))[:, None] & col_mask[None, :]
    return tok, head, mask


@triton.jit
def _load_tile(x_ptr, tok, head, cols, mask, stride_t, stride_h):
    return tl.load(x_ptr + (tok * stride_t + head * stride_h)[:, None] + cols[None, :], mask=mask, other=0.0,
                   eviction_policy="evict_first").to(tl.float32)


@triton.jit
def _norm_store(o_ptr, x, w, tok, head, cols, mask, D, stride_ot, stride_oh, eps):
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(o_ptr + (tok * stride_ot + head * stride_oh)[:, None] + cols[None, :], y.to(o_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _qk_rms_norm_fused_kernel(q_ptr, k_ptr, wq_ptr, wk_ptr, qo_ptr, ko_ptr, T, HQ, HK, D,
                              stride_qt, stride_qh, stride_kt, stride_kh, stride_qot, stride_qoh, stride_kot,
                              stride_koh, eps, TOKENS: tl.constexpr, HEADS_Q: tl.constexpr, HEADS_K: tl.constexpr,
                              BLOCK_D: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    tok0 = tl.program_id(0) * TOKENS
    cols = tl.arange(0, BLOCK_D)
    col_mask = cols < D
    # every load before any reduction or store: k's tile, loaded after q's stores, waited for q's round trip
    q_tok, q_head, q_mask = _token_tile(tok0, T, HQ, col_mask, TOKENS, HEADS_Q)
    k_tok, k_head, k_mask = _token_tile(tok0, T, HK, col_mask, TOKENS, HEADS_K)
    xq = _load_tile(q_ptr, q_tok, q_head, cols, q_mask, stride_qt, stride_qh)
    xk = _load_tile(k_ptr, k_tok, k_head, cols, k_mask, stride_kt, stride_kh)
    wq = tl.load(wq_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    wk = tl.load(wk_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    _norm_store(qo_ptr, xq, wq, q_tok, q_head, cols, q_mask, D, stride_qot, stride_qoh, eps)
    _norm_store(ko_ptr, xk, wk, k_tok, k_head, cols, k_mask, D, stride_kot, stride_koh, eps)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(T: int, block_d: int) -> dict:
    table = CONFIGS["by_block_d"] if T <= CONFIGS["decode_max_t"] else CONFIGS["prefill_by_block_d"]
    fitting = [key for key in sorted(table) if key >= block_d]
    return table[fitting[0] if fitting else max(table)]


def qk_rms_norm(q, k, wq, wk, eps=1e-6):
    if q.dim() != 3 or k.dim() != 3 or k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2] \
            or wq.shape != (q.shape[2],) or wk.shape != (q.shape[2],):
        raise ValueError(f"qk_rms_norm expects q[T,Hq,D], k[T,Hk,D], wq[D], wk[D]; got q {tuple(q.shape)}, k "
                         f"{tuple(k.shape)}, wq {tuple(wq.shape)}, wk {tuple(wk.shape)}")
    if q.stride(2) != 1 or k.stride(2) != 1 or wq.stride(0) != 1 or wk.stride(0) != 1:
        raise ValueError("qk_rms_norm: q, k, wq and wk need unit stride along D (tokens and heads may be strided)")
    T, HQ, D = q.shape
    HK = k.shape[1]
    q_out = torch.empty((T, HQ, D), dtype=q.dtype, device=q.device)
    k_out = torch.empty((T, HK, D), dtype=k.dtype, device=k.device)
    if T == 0 or D == 0:
        return q_out, k_out
    block_d = triton.next_power_of_2(D)
    cfg = _config(T, block_d)
    pdl = _pdl(q)
    if cfg["FUSED"]:
        tokens = cfg["TOKENS"]
        _qk_rms_norm_fused_kernel[(triton.cdiv(T, tokens),)](
            q, k, wq, wk, q_out, k_out, T, HQ, HK, D, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
            q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1), eps, TOKENS=tokens,
            HEADS_Q=triton.next_power_of_2(HQ), HEADS_K=triton.next_power_of_2(HK), BLOCK_D=block_d,
            USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
        return q_out, k_out
    block_h = min(cfg["BLOCK_H"], triton.next_power_of_2(max(HQ, HK)))
    q_blocks = triton.cdiv(HQ, block_h)
    grid = (T, q_blocks + triton.cdiv(HK, block_h))
    _qk_rms_norm_kernel[grid](q, k, wq, wk, q_out, k_out, HQ, HK, D, q_blocks, q.stride(0), q.stride(1),
                              k.stride(0), k.stride(1), q_out.stride(0), q_out.stride(1), k_out.stride(0),
                              k_out.stride(1), eps, BLOCK_H=block_h, BLOCK_D=block_d, PRELOAD_W=cfg["PRELOAD_W"],
                              USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return q_out, k_out
