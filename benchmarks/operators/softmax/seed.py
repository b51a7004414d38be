"""Seed softmax over the vocabulary: p = exp(x - max) / sum(exp(x - max)), fp32 math and fp32 output.

Split rows: a row of V = 32k-201k logits is cut into SPLITS contiguous chunks, one program each, so decode
batches of 1-64 rows still fill the GPU. Pass 1 (_softmax_partials_kernel) keeps a running max and a
rescaled running sum per lane over its chunk and writes one (max, sum) pair per chunk; pass 2
(_softmax_normalize_kernel) combines the row's pairs (a few dozen floats) and writes its chunk's
probabilities, re-reading x. Two launches, no host synchronization (graph-capturable).

Structural switches (0 is the earlier seed): at T = 256 rows of 129k-152k bf16 logits x is 66-78 MB, more than
the H200's 50 MB L2, so pass 2 re-reads it from DRAM. REVERSE=1 runs pass 2's programs in the reverse order
(last row and chunk first): pass 1 ended on those, so the first part of pass 2 finds them still in L2 instead
of starting on the oldest (already evicted) lines. PASS1_EVICT_LAST=1 loads pass 1's tiles with
evict_last, asking L2 to keep them for the re-read.
"""
import torch
import triton
import triton.language as tl

# BLOCK_V: elements a program handles per step; TARGET_PROGRAMS: programs the split aims for (a multiple
# of the H200's 132 SMs), so SPLITS = TARGET_PROGRAMS / T chunks per row, at least one tile each.
# REVERSE with 2048-wide steps and 8 warps: the variant `reverse_b2048_w8`, 14-18% faster than the earlier
# seed on every hot shape on the H200 (2026-12-02, benchmarks/results/new_ops_h200.md).
CONFIGS = {
    "BLOCK_V": 2048,
    "TARGET_PROGRAMS": 528,
    "MAX_SPLITS": 64,
    "num_warps": 8,
    "REVERSE": 1,
    "PASS1_EVICT_LAST": 0,
}
SEARCH_SPACE = {"REVERSE": [0, 1], "PASS1_EVICT_LAST": [0, 1]}


@triton.jit
def _softmax_partials_kernel(x_ptr, part_ptr, V, stride_x, CHUNK, SPLITS, BLOCK_V: tl.constexpr,
                             EVICT_LAST: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, V)
    cols = tl.arange(0, BLOCK_V)
    # A finite floor instead of -inf for the running max: lanes that only ever see the masked tail keep
    # m = -1e30 and s = 0, and no -inf - -inf (NaN) is ever formed.
    m = tl.full([BLOCK_V], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK_V], dtype=tl.float32)
    for off in range(start, end, BLOCK_V):
        c = off + cols
        if EVICT_LAST:
            x = tl.load(x_ptr + row * stride_x + c, mask=c < end, other=float("-inf"),
                        eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_ptr + row * stride_x + c, mask=c < end, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_all = tl.max(m, axis=0)
    s_all = tl.sum(s * tl.exp(m - m_all), axis=0)
    base = part_ptr + (row * SPLITS + split) * 2
    tl.store(base, m_all)
    tl.store(base + 1, s_all)


@triton.jit
def _softmax_normalize_kernel(x_ptr, part_ptr, y_ptr, V, stride_x, stride_y, CHUNK, SPLITS,
                              BLOCK_V: tl.constexpr, BLOCK_S: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:     # the programs pass 1 ran last first: their tiles are the ones still in L2
        row = (tl.num_programs(0) - 1 - tl.program_id(0)).to(tl.int64)
        split = tl.num_programs(1) - 1 - tl.program_id(1)
    else:
        row = tl.program_id(0).to(tl.int64)
        split = tl.program_id(1)
    sp = tl.arange(0, BLOCK_S)
    pm = tl.load(part_ptr + (row * SPLITS + sp) * 2, mask=sp < SPLITS, other=-1.0e30)
    ps = tl.load(part_ptr + (row * SPLITS + sp) * 2 + 1, mask=sp < SPLITS, other=0.0)
    m = tl.max(pm, axis=0)
    total = tl.sum(ps * tl.exp(pm - m), axis=0)
    inv = 1.0 / total
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, V)
    cols = tl.arange(0, BLOCK_V)
    for off in range(start, end, BLOCK_V):
        c = off + cols
        mask = c < end
        x = tl.load(x_ptr + row * stride_x + c, mask=mask, other=float("-inf"),
                    eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + row * stride_y + c, tl.exp(x - m) * inv, mask=mask)


def _split(T: int, V: int, block_v: int) -> tuple[int, int]:
    """(chunk, splits): chunks of whole tiles, none empty, about TARGET_PROGRAMS programs in all."""
    tiles = triton.cdiv(V, block_v)
    want = max(1, min(CONFIGS["MAX_SPLITS"], tiles, triton.cdiv(CONFIGS["TARGET_PROGRAMS"], T)))
    chunk = triton.cdiv(tiles, want) * block_v
    return chunk, triton.cdiv(V, chunk)


def softmax(x):
    if x.dim() != 2:
        raise ValueError(f"softmax expects x[T,V]; got x {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    T, V = x.shape
    y = torch.empty((T, V), dtype=torch.float32, device=x.device)
    if T == 0 or V == 0:
        return y
    block_v = CONFIGS["BLOCK_V"]
    chunk, splits = _split(T, V, block_v)
    part = torch.empty((T, splits, 2), dtype=torch.float32, device=x.device)
    grid = (T, splits)
    _softmax_partials_kernel[grid](x, part, V, x.stride(0), chunk, splits, BLOCK_V=block_v,
                                   EVICT_LAST=CONFIGS["PASS1_EVICT_LAST"], num_warps=CONFIGS["num_warps"])
    _softmax_normalize_kernel[grid](x, part, y, V, x.stride(0), y.stride(0), chunk, splits, BLOCK_V=block_v,
                                    BLOCK_S=triton.next_power_of_2(splits), REVERSE=CONFIGS["REVERSE"],
                                    num_warps=CONFIGS["num_warps"])
    return y
