# expect: reject
# stage: correctness
# op: top_k_top_p_filter
# needs: cpu
# timeout_s: 400
# cause: exceed|nan
# why: measures the nucleus under the softmax of the whole row instead of the entries top-k kept (one normalizer for both filters): the mass above each entry is too small, so rows with both filters active keep too many entries
import torch
import triton
import triton.language as tl


@triton.jit
def _as_float(key):
    return tl.where(key < 0, key ^ 0x7FFFFFFF, key).to(tl.float32, bitcast=True)


@triton.jit
def _as_key(x):
    b = x.to(tl.int32, bitcast=True)
    return tl.where(b < 0, b ^ 0x7FFFFFFF, b)


@triton.jit
def _count_at_least(x_row, V, t, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    n = tl.zeros([BLOCK], dtype=tl.int32)
    for off in range(0, V, BLOCK):
        x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
        n += (x >= t).to(tl.int32)
    return tl.sum(n, axis=0)


@triton.jit
def _mass_above(x_row, V, t, t_k, top, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, V, BLOCK):
        x = tl.load(x_row + off + cols, mask=off + cols < V, other=float("-inf"))
        s += tl.where((x > t) & (x >= t_k), tl.exp(x - top), 0.0)
    return tl.sum(s, axis=0)


@triton.jit
def _filter_kernel(x_ptr, k_ptr, p_ptr, y_ptr, V, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride
    cols = tl.arange(0, BLOCK)
    k = tl.load(k_ptr + row)
    p = tl.load(p_ptr + row)
    mx = tl.full([BLOCK], float("-inf"), tl.float32)
    mn = tl.full([BLOCK], float("inf"), tl.float32)
    for off in range(0, V, BLOCK):
        mask = off + cols < V
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        mx = tl.maximum(mx, x)
        mn = tl.minimum(mn, tl.where(mask, x, float("inf")))
    top = tl.max(mx, axis=0)
    lo = _as_key(tl.min(mn, axis=0)).to(tl.int64)
    hi = _as_key(top).to(tl.int64)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _count_at_least(x_row, V, _as_float(mid.to(tl.int32)), BLOCK) >= k:
            lo = mid
        else:
            hi = mid - 1
    t_k = _as_float(lo.to(tl.int32))
    thr = t_k
    if p < 1.0:
        z = _mass_above(x_row, V, float("-inf"), float("-inf"), top, BLOCK)
        hi = _as_key(top).to(tl.int64)
        while lo < hi:
            mid = (lo + hi) // 2
            if _mass_above(x_row, V, _as_float(mid.to(tl.int32)), float("-inf"), top, BLOCK) < p * z:
                hi = mid
            else:
                lo = mid + 1
        thr = _as_float(lo.to(tl.int32))
    for off in range(0, V, BLOCK):
        mask = off + cols < V
        x = tl.load(x_row + off + cols, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * V + off + cols, tl.where(x >= thr, x, float("-inf")), mask=mask)


def top_k_top_p_filter(logits, k, p):
    logits = logits.contiguous()
    B, V = logits.shape
    y = torch.empty((B, V), dtype=torch.float32, device=logits.device)
    _filter_kernel[(B,)](logits, k, p, y, V, logits.stride(0), BLOCK=512)
    return y
