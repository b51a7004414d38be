"""Seed MoE router: fp32 softmax over the experts, then k rounds of argmax, in one launch.

Each program holds ROWS tokens' whole logit rows in registers ([ROWS, BLOCK_E], E <= a few hundred). The
selection runs on the logits (softmax is monotonic and equal logits give equal probabilities): each round takes
the row maximum, the lowest column holding it (the tie rule), records it and masks it out, so ids come out
largest first. Weights are exp(x - max) of the chosen experts over the row's sum, or over the chosen ones' sum
when RENORMALIZE (a constexpr from the call's renormalize). No host synchronization.

A round is a chain of dependent row reductions, and at decode (T = 1-256, 8 rounds) the kernel is that chain.
Structural switch SELECT (per table entry):
- 0 (the earlier seed): max, then the min column holding it, then a masked sum that gathers exp(x - top) at that
  column: three reductions a round.
- 1: the gathered weight is exp(best - top) of the round's maximum itself (the same fp32 operation on the same
  value as the gather read, so bit-identical): two reductions a round.
- 2: one reduction a round: each logit becomes an int64 key, its fp32 bits mapped to an order-preserving int32
  (negative values' magnitude bits flipped, -0.0 taken as +0.0) in the high half and BLOCK_E - 1 - column in
  the low half, so the key maximum is the largest logit at its lowest column (the tie rule); chosen keys drop
  to the minimum int64.
- 3: the same keys, and the k largest taken at once by a bitonic top-k (tl.topk, BLOCK_K keys largest first)
  instead of k rounds: about log2(BLOCK_K) * log2(BLOCK_E) compare-and-swap steps in place of k full row
  reductions of log2(BLOCK_E) levels each. Slots from K up to BLOCK_K are never stored. With KEY32 (bf16
  logits, CONFIGS["key32"]) the keys are int32: a bf16 value's order-preserving bits fill the high 16 bits
  exactly (its fp32 form has 16 zero low bits) and BLOCK_E - 1 - column the low 16, so every compare,
  select and shuffle of the top-k is one 32-bit instruction instead of two; with RENORMALIZE the weights'
  shift is the largest chosen logit, so no separate row maximum is taken.
"""
import torch
import triton
import triton.language as tl

# Tunables, keyed by BLOCK_E (E rounded up to a power of two; larger sizes use the largest key): tokens per
# program and warps, about 16 logits a thread. At E = 128: SELECT=3 with one token a one-warp program (variant
# `select3_r1_w1`), 2.10-3.08 us at T = 1-1024 on the H200 where SELECT=2 with 4 tokens took 2.93-3.43
# (2026-12-03, benchmarks/results/new_ops_h200.md). From large_t_min tokens on, large_t_by_block_e replaces an
# entry of the same key: with int64 keys at T = 4096 the bitonic top-k's extra work showed (6.30 us) and
# SELECT=1 with 4 tokens timed fastest (4.98; SELECT=2 5.60). With int32 keys (key32) the bitonic top-k was the
# fastest at every T (T = 1-4096: 1.93-4.75 us against 2.12-5.07, variant `key32_all_t`, 2026-12-03), so
# large_t_min is out of reach and the large-T table a switch for the search.
CONFIGS = {
    "by_block_e": {
        8: {"ROWS": 64, "num_warps": 1, "SELECT": 2},
        16: {"ROWS": 32, "num_warps": 1, "SELECT": 2},
        32: {"ROWS": 16, "num_warps": 1, "SELECT": 2},
        64: {"ROWS": 16, "num_warps": 2, "SELECT": 2},
        128: {"ROWS": 1, "num_warps": 1, "SELECT": 3},
        256: {"ROWS": 8, "num_warps": 4, "SELECT": 2},
        512: {"ROWS": 4, "num_warps": 4, "SELECT": 2},
        1024: {"ROWS": 2, "num_warps": 4, "SELECT": 2},
        2048: {"ROWS": 1, "num_warps": 4, "SELECT": 2},
    },
    "key32": 1,              # SELECT=3 on bf16 logits: int32 keys (see the docstring)
    "large_t_min": 1 << 40,
    "large_t_by_block_e": {
        128: {"ROWS": 4, "num_warps": 2, "SELECT": 1},
    },
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). Timed on neither card yet (session 22's batch ran out of time first; the
    # variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"SELECT": [0, 1, 2, 3], "key32": [0, 1], "PDL": [0, 1]}


@triton.jit
def _moe_topk_softmax_kernel(x_ptr, w_ptr, id_ptr, T, E, K, stride_x, stride_w, stride_id,
                             ROWS: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
                             RENORMALIZE: tl.constexpr, SELECT: tl.constexpr, KEY32: tl.constexpr,
                             USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < T
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK_E)
    mask = row_mask[:, None] & (cols < E)[None, :]
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=float("-inf"),
                eviction_policy="evict_first").to(tl.float32)
    top = tl.where(row_mask, tl.max(x, axis=1), 0.0)      # rows past T hold only -inf
    e = tl.where(mask, tl.exp(x - top[:, None]), 0.0)
    slots = tl.arange(0, BLOCK_K)
    if SELECT >= 2:
        bits = x.to(tl.int32, bitcast=True)
        key32 = tl.where(x == 0.0, 0, tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits))
        left = (key32.to(tl.int64) << 32) | (BLOCK_E - 1 - cols)[None, :].to(tl.int64)     # unused with KEY32
    else:
        left = x
    if SELECT == 3 and KEY32:
        # bf16 logits: the high 16 bits of the order-preserving key32 carry the whole value (negative keys have
        # all-ones low bits, dropped here and put back when decoding)
        best_key = tl.topk((key32 & -65536) | (BLOCK_E - 1 - cols)[None, :], BLOCK_K, dim=1)
        chosen_id = BLOCK_E - 1 - (best_key & 0xFFFF)
        k32 = best_key & -65536
        best = tl.where(k32 < 0, (k32 | 0xFFFF) ^ 0x7FFFFFFF, k32).to(tl.float32, bitcast=True)
        shift = tl.max(best, axis=1) if RENORMALIZE else top
        chosen_e = tl.where(row_mask[:, None] & (slots < K)[None, :], tl.exp(best - shift[:, None]), 0.0)
    elif SELECT == 3:
        best_key = tl.topk(left, BLOCK_K, dim=1)          # [ROWS, BLOCK_K], largest first
        chosen_id = BLOCK_E - 1 - (best_key & 0xFFFFFFFF).to(tl.int32)
        k32 = (best_key >> 32).to(tl.int32)
        best = tl.where(k32 < 0, k32 ^ 0x7FFFFFFF, k32).to(tl.float32, bitcast=True)
        chosen_e = tl.where(row_mask[:, None] & (slots < K)[None, :], tl.exp(best - top[:, None]), 0.0)
    else:
        chosen_e = tl.zeros([ROWS, BLOCK_K], dtype=tl.float32)
        chosen_id = tl.zeros([ROWS, BLOCK_K], dtype=tl.int32)
        if SELECT == 2:
            gone = tl.full([ROWS, BLOCK_E], -2147483648, tl.int32).to(tl.int64) << 32
        for j in range(K):
            if SELECT == 2:
                best_key = tl.max(left, axis=1)
                idx = BLOCK_E - 1 - (best_key & 0xFFFFFFFF).to(tl.int32)
                k32 = (best_key >> 32).to(tl.int32)
                best = tl.where(k32 < 0, k32 ^ 0x7FFFFFFF, k32).to(tl.float32, bitcast=True)
            else:
                best = tl.max(left, axis=1)
                idx = tl.min(tl.where(left == best[:, None], cols[None, :], BLOCK_E), axis=1)
            hit = cols[None, :] == idx[:, None]
            if SELECT == 0:
                ej = tl.sum(tl.where(hit, e, 0.0), axis=1)
            else:
                ej = tl.where(row_mask, tl.exp(best - top), 0.0)
            chosen_e = tl.where(slots[None, :] == j, ej[:, None], chosen_e)
            chosen_id = tl.where(slots[None, :] == j, idx[:, None], chosen_id)
            if SELECT == 2:
                left = tl.where(hit, gone, left)
            else:
                left = tl.where(hit, float("-inf"), left)
    if RENORMALIZE:
        denom = tl.sum(chosen_e, axis=1)
    else:
        denom = tl.sum(e, axis=1)
    denom = tl.where(row_mask, denom, 1.0)
    out_mask = row_mask[:, None] & (slots < K)[None, :]
    tl.store(w_ptr + rows64[:, None] * stride_w + slots[None, :], chosen_e / denom[:, None], mask=out_mask)
    tl.store(id_ptr + rows64[:, None] * stride_id + slots[None, :], chosen_id, mask=out_mask)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(T: int, block_e: int) -> dict:
    table = CONFIGS["by_block_e"]
    fitting = [key for key in sorted(table) if key >= block_e]
    key = fitting[0] if fitting else max(table)
    if T >= CONFIGS["large_t_min"]:
        return CONFIGS["large_t_by_block_e"].get(key, table[key])
    return table[key]


def moe_topk_softmax(logits, k=8, renormalize=True):
    if logits.dim() != 2 or not 1 <= int(k) <= logits.shape[1]:
        raise ValueError(f"moe_topk_softmax expects logits[T,E] and 1 <= k <= E; got logits {tuple(logits.shape)}, "
                         f"k={k}")
    if logits.stride(1) != 1:
        raise ValueError("moe_topk_softmax: logits need unit stride along E (rows may be strided)")
    T, E = logits.shape
    k = int(k)
    weights = torch.empty((T, k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((T, k), dtype=torch.int32, device=logits.device)
    if T == 0:
        return weights, ids
    block_e = triton.next_power_of_2(E)
    cfg = _config(T, block_e)
    grid = (triton.cdiv(T, cfg["ROWS"]),)
    pdl = _pdl(logits)
    _moe_topk_softmax_kernel[grid](logits, weights, ids, T, E, k, logits.stride(0), weights.stride(0), ids.stride(0),
                                   ROWS=cfg["ROWS"], BLOCK_E=block_e, BLOCK_K=triton.next_power_of_2(k),
                                   RENORMALIZE=bool(renormalize), SELECT=cfg["SELECT"],
                                   KEY32=bool(CONFIGS["key32"]) and logits.dtype == torch.bfloat16 and block_e <= 1 << 16,
                                   USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return weights, ids
