"""Seed top-k / top-p filter: thresholds by a multi-way search over the ordered bit patterns of fp32, no sort.

One program per row. Logits map to int32 keys that order like the floats (negative floats have their
magnitude bits flipped), so a search over keys finds an exact threshold:
  t_k = the largest float t with count(x >= t) >= k   (the k-th largest logit; ties at it all kept)
  t_p = the smallest float t >= t_k with mass(x > t) < p, mass under the softmax of the entries >= t_k
and the row is written as x where x >= max(t_k, t_p), else -inf. Each pass over the row tests WAYS - 1
(top-k) or WAYS (top-p) thresholds at once, splitting the key interval WAYS ways: ceil(32 / log2(WAYS))
passes per threshold instead of bisection's 32 (WAYS=2). At the B=2 prefill shapes one program per row is
bound by the latency of its passes (1.8 ms for ~70 passes over 129k logits on the H200, against the sort's
0.66 ms), which is what fewer passes buy back; WAYS=16 has not been timed on the GPU yet. No host
synchronization.
"""
import torch
import triton
import triton.language as tl

# 16 ways, 1024-wide tiles, 8 warps: the variant `ways16_b1024_w8`, 1.4-1.6x faster than 512-wide tiles with 4
# warps on every hot shape on the H200 (2026-12-02, benchmarks/results/new_ops_h200.md).
CONFIGS = {"BLOCK_V": 1024, "num_warps": 8, "WAYS": 16}


@triton.jit
def _key_to_float(key):
    # inverse of the order-preserving map below: flip the magnitude bits back for negative floats
    bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _top_k_top_p_filter_kernel(x_ptr, k_ptr, p_ptr, y_ptr, V, stride_x, stride_y, BLOCK_V: tl.constexpr,
                               WAYS: tl.constexpr, PASSES: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_V)
    ways = tl.arange(0, WAYS).to(tl.int64)
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
    # order-preserving int32 keys of the two ends, searched in int64 (keys span the whole int32 range)
    tb = top.to(tl.int32, bitcast=True)
    bb = bottom.to(tl.int32, bitcast=True)
    hi_top = tl.where(tb < 0, tb ^ 0x7FFFFFFF, tb).to(tl.int64)
    lo = tl.where(bb < 0, bb ^ 0x7FFFFFFF, bb).to(tl.int64)
    hi = hi_top
    # top-k: the largest key t with count(x >= t) >= k. Invariant: count(x >= key lo) >= k, and every key
    # above hi counts fewer. Thresholds lo + j * step (j = 0 is lo itself, always true).
    for _ in range(PASSES):
        step = (hi - lo + WAYS) // WAYS
        cand = lo + ways * step
        tf = _key_to_float(tl.minimum(cand, hi).to(tl.int32))
        cnt = tl.zeros([WAYS], dtype=tl.int32)
        for off in range(0, V, BLOCK_V):
            x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
            cnt += tl.sum((x[:, None] >= tf[None, :]).to(tl.int32), axis=0)
        ok = (cnt >= k) & (cand <= hi)
        j = tl.max(tl.where(ok, ways, 0), axis=0)
        new_lo = lo + j * step
        hi = tl.minimum(hi, new_lo + step - 1)
        lo = new_lo
    t_k = _key_to_float(lo.to(tl.int32))
    # normalizer of the softmax over the entries >= t_k
    z = tl.zeros([BLOCK_V], dtype=tl.float32)
    for off in range(0, V, BLOCK_V):
        x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
        z += tl.where(x >= t_k, tl.exp(x - top), 0.0)
    inv_z = 1.0 / tl.sum(z, axis=0)
    # top-p: the smallest key t in [key(t_k), key(top)] with mass(x > t) < p. Invariant: mass(x > key hi) < p
    # (mass(x > top) = 0). Thresholds lo + (j + 1) * step - 1, the last clamped to hi (known true).
    hi = hi_top
    for _ in range(PASSES):
        step = (hi - lo + WAYS) // WAYS
        cand = tl.minimum(lo + (ways + 1) * step - 1, hi)
        tf = _key_to_float(cand.to(tl.int32))
        acc = tl.zeros([WAYS], dtype=tl.float32)
        for off in range(0, V, BLOCK_V):
            x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
            e = tl.where(x >= t_k, tl.exp(x - top), 0.0)
            acc += tl.sum(tl.where(x[:, None] > tf[None, :], e[:, None], 0.0), axis=0)
        below = (acc * inv_z < p) | (ways == WAYS - 1)
        j = tl.min(tl.where(below, ways, WAYS - 1), axis=0)
        new_hi = tl.minimum(lo + (j + 1) * step - 1, hi)
        lo = lo + j * step
        hi = new_hi
    t_p = _key_to_float(lo.to(tl.int32))
    thr = tl.where(p >= 1.0, t_k, t_p)
    for off in range(0, V, BLOCK_V):
        mask = off + cols < V
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride_y + off + cols, tl.where(x >= thr, x, float("-inf")), mask=mask)


def _passes(ways: int) -> int:
    """Passes that shrink a 2^32-wide key interval to one key, splitting it `ways` ways each time."""
    width, n = 1 << 32, 0
    while width > 1:
        width, n = -(-width // ways), n + 1
    return n


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
    ways = CONFIGS["WAYS"]
    _top_k_top_p_filter_kernel[(B,)](logits, k, p, y, V, logits.stride(0), y.stride(0),
                                     BLOCK_V=CONFIGS["BLOCK_V"], WAYS=ways, PASSES=_passes(ways),
                                     num_warps=CONFIGS["num_warps"])
    return y
