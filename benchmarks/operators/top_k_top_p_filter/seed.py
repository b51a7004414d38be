"""Seed top-k / top-p filter: thresholds by bisection over the ordered bit patterns of fp32, no sort.

One program per row. Logits map to int32 keys that order like the floats (negative floats have their
magnitude bits flipped), so a bisection over keys finds an exact threshold in 32 steps:
  t_k = the largest float t with count(x >= t) >= k   (the k-th largest logit; ties at it all kept)
  t_p = the smallest float t >= t_k with mass(x > t) < p, mass under the softmax of the entries >= t_k
and the row is written as x where x >= max(t_k, t_p), else -inf. Every bisection step is one pass over
the row (L2-resident for a few hundred rows at once), so this seed reads each row about 70 times: correct
and graph-capturable, and the obvious target for a faster selection (radix histograms, a candidate
pre-filter). No host synchronization.
"""
import torch
import triton
import triton.language as tl

CONFIGS = {"BLOCK_V": 1024, "num_warps": 4}


@triton.jit
def _key_to_float(key):
    # inverse of the order-preserving map below: flip the magnitude bits back for negative floats
    bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _top_k_top_p_filter_kernel(x_ptr, k_ptr, p_ptr, y_ptr, V, stride_x, stride_y, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_V)
    x_row = x_ptr + row * stride_x
    k = tl.load(k_ptr + row)
    p = tl.load(p_ptr + row)
    # pass 1: max and min of the row
    mx = tl.full([BLOCK_V], float("-inf"), tl.float32)
    mn = tl.full([BLOCK_V], float("inf"), tl.float32)
    for off in range(0, V, BLOCK_V):
        mask = off + cols < V
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        mx = tl.maximum(mx, x)
        mn = tl.minimum(mn, tl.where(mask, x, float("inf")))
    top = tl.max(mx, axis=0)
    bottom = tl.min(mn, axis=0)
    # order-preserving int32 keys of the two ends
    tb = top.to(tl.int32, bitcast=True)
    bb = bottom.to(tl.int32, bitcast=True)
    hi = tl.where(tb < 0, tb ^ 0x7FFFFFFF, tb)
    lo = tl.where(bb < 0, bb ^ 0x7FFFFFFF, bb)
    # top-k: the largest key t with count(x >= t) >= k (int64 midpoints: keys span the whole int32 range)
    lo64 = lo.to(tl.int64)
    hi64 = hi.to(tl.int64)
    for _ in range(32):
        mid = (lo64 + hi64 + 1) // 2
        t = _key_to_float(mid.to(tl.int32))
        cnt = tl.zeros([BLOCK_V], dtype=tl.int32)
        for off in range(0, V, BLOCK_V):
            x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
            cnt += (x >= t).to(tl.int32)
        ok = tl.sum(cnt, axis=0) >= k          # invariant: count(x >= key lo) >= k; at lo == hi, mid == lo
        lo64 = tl.where(ok, mid, lo64)
        hi64 = tl.where(ok, hi64, mid - 1)
    t_k = _key_to_float(lo64.to(tl.int32))
    # normalizer of the softmax over the entries >= t_k
    z = tl.zeros([BLOCK_V], dtype=tl.float32)
    for off in range(0, V, BLOCK_V):
        x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
        z += tl.where(x >= t_k, tl.exp(x - top), 0.0)
    inv_z = 1.0 / tl.sum(z, axis=0)
    # top-p: the smallest key t in [key(t_k), key(top)] with mass(x > t) < p (mass(x > top) = 0 < p)
    hi64 = hi.to(tl.int64)
    for _ in range(32):
        mid = (lo64 + hi64) // 2
        t = _key_to_float(mid.to(tl.int32))
        acc = tl.zeros([BLOCK_V], dtype=tl.float32)
        for off in range(0, V, BLOCK_V):
            x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
            acc += tl.where((x > t) & (x >= t_k), tl.exp(x - top), 0.0)
        below = tl.sum(acc, axis=0) * inv_z < p   # invariant: mass(x > key hi) < p; at lo == hi, mid == lo
        hi64 = tl.where(below, mid, hi64)
        lo64 = tl.where(below, lo64, mid + 1)
    t_p = _key_to_float(lo64.to(tl.int32))
    thr = tl.where(p >= 1.0, t_k, t_p)
    for off in range(0, V, BLOCK_V):
        mask = off + cols < V
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride_y + off + cols, tl.where(x >= thr, x, float("-inf")), mask=mask)


def top_k_top_p_filter(logits, k, p):
    if logits.dim() != 2 or k.shape != (logits.shape[0],) or p.shape != (logits.shape[0],):
        raise ValueError(f"top_k_top_p_filter expects logits[B,V], k[B], p[B]; got logits {tuple(logits.shape)}, "
                         f"k {tuple(k.shape)}, p {tuple(p.shape)}")
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    B, V = logits.shape
    y = torch.empty((B, V), dtype=torch.float32, device=logits.device)
    if B == 0 or V == 0:
        return y
    _top_k_top_p_filter_kernel[(B,)](logits, k, p, y, V, logits.stride(0), y.stride(0),
                                     BLOCK_V=CONFIGS["BLOCK_V"], num_warps=CONFIGS["num_warps"])
    return y
