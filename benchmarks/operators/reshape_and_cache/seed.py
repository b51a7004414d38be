"""Seed KV-cache write: key/value rows of each token copied into their slot of the paged caches, in place.

Pure data movement: a program copies BLOCK elements of one token's Hk*D row of key and of value (TOKENS
tokens per program along the grid's first axis), masked off entirely for a padding token (slot -1), so no
other slot is ever touched. One launch, no host synchronization (the slot is read on the device), so the
call can be captured in a CUDA graph. Tunables by the row width Hk*D rounded up to a power of two.

Every load is issued before the first store, and the key/value loads do not wait for the slot: a padding
token's row is read (it is the caller's input, in bounds) and only its stores are masked off. (The earlier
seed masked the loads by the slot and went token by token: the rows' loads waited for the slot's DRAM
round trip, and the second token's loads for the first token's stores.)
"""
import torch
import triton
import triton.language as tl

# BLOCK: elements of the Hk*D row per program (wider rows take several programs along axis 1); TOKENS: tokens
# per program along axis 0 (more bytes in flight per program for decode's one-token rows).
CONFIGS = {
    "by_row": {
        256: {"BLOCK": 256, "TOKENS": 2, "num_warps": 2},
        512: {"BLOCK": 512, "TOKENS": 2, "num_warps": 4},
        1024: {"BLOCK": 1024, "TOKENS": 1, "num_warps": 4},
        2048: {"BLOCK": 1024, "TOKENS": 1, "num_warps": 4},
    },
    # 1: the cache's block size is a compile-time constant (one build per block size; 16 is a shift and a mask), so a
    # token's slot splits into (block, offset) by a few instructions; 0: by int64 division by a runtime value (the
    # seed before session 35), a 64-bit divide on each program's dependent chain from the slot's load to the
    # stores. Offline for sm_90: see benchmarks/results/session35_h100.md. On an H100 (session 36, 9 paired rounds)
    # the variant `bs_runtime` (the way before) took 1.03-1.07 of the seed's time on every hot shape.
    "bs_constexpr": 1,
    # PDL=1: programmatic dependent launch on GPUs that have it (compute capability 9+): the kernel may start while
    # the one before it in the stream finishes, waits for it (gdc_wait) before its first load and lets the next one
    # start at once (gdc_launch_dependents). On an H100 it took 0.93-1.07 of the time without it (one timing a shape,
    # session22_h100.md): off; the H200 has not timed it (the variant `pdl`).
    "PDL": 0,
}
SEARCH_SPACE = {"PDL": [0, 1], "bs_constexpr": [0, 1]}


@triton.jit
def _reshape_and_cache_kernel(key_ptr, value_ptr, kc_ptr, vc_ptr, slot_ptr, T, HD, D, BS,
                              sk_t, sk_h, sv_t, sv_h, sc_b, sc_s, sc_h, sc_d,
                              BLOCK: tl.constexpr, TOKENS: tl.constexpr, BS_CONST: tl.constexpr = 0,
                              USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    h = cols // D
    d = cols % D
    col_mask = cols < HD
    t = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    live = t < T
    t64 = t.to(tl.int64)
    slot = tl.load(slot_ptr + t, mask=live, other=-1).to(tl.int64)
    rows = live[:, None] & col_mask[None, :]
    k = tl.load(key_ptr + t64[:, None] * sk_t + (h * sk_h + d)[None, :], mask=rows)
    v = tl.load(value_ptr + t64[:, None] * sv_t + (h * sv_h + d)[None, :], mask=rows)
    mask = rows & (slot >= 0)[:, None]          # a padding token (slot -1) writes nothing
    if BS_CONST > 0:        # the block size as a constant: no division on the way from the slot to the stores
        bs = BS_CONST
    else:
        bs = BS
    dst = ((slot // bs) * sc_b + (slot % bs) * sc_s)[:, None] + (h * sc_h + d * sc_d)[None, :]
    tl.store(kc_ptr + dst, k, mask=mask)
    tl.store(vc_ptr + dst, v, mask=mask)


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _config(row: int) -> dict:
    table = CONFIGS["by_row"]
    fitting = [k for k in sorted(table) if k >= row]
    return dict(table[fitting[0] if fitting else max(table)])


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    T, Hk, D = key.shape
    if key.stride(2) != 1 or value.stride(2) != 1 or value.shape != key.shape:
        raise ValueError(f"reshape_and_cache expects key and value [T,Hk,D] with a contiguous last dim; got "
                         f"key {tuple(key.shape)} strides {key.stride()}, value {tuple(value.shape)} {value.stride()}")
    if key_cache.stride() != value_cache.stride() or key_cache.shape[2:] != (Hk, D):
        raise ValueError(f"key_cache and value_cache must be [NB,BS,{Hk},{D}] with the same strides; got "
                         f"{tuple(key_cache.shape)} {key_cache.stride()} and {tuple(value_cache.shape)} {value_cache.stride()}")
    if T == 0:
        return None
    HD = Hk * D
    cfg = _config(triton.next_power_of_2(HD))
    grid = (triton.cdiv(T, cfg["TOKENS"]), triton.cdiv(HD, cfg["BLOCK"]))
    pdl = _pdl(key)
    _reshape_and_cache_kernel[grid](key, value, key_cache, value_cache, slot_mapping, T, HD, D, key_cache.shape[1],
                                    key.stride(0), key.stride(1), value.stride(0), value.stride(1),
                                    *key_cache.stride(), BLOCK=cfg["BLOCK"], TOKENS=cfg["TOKENS"],
                                    BS_CONST=key_cache.shape[1] if CONFIGS["bs_constexpr"] else 0,
                                    USE_PDL=pdl, launch_pdl=pdl, num_warps=cfg["num_warps"])
    return None
