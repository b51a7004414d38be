# expect: reject
# stage: correctness
# op: reshape_and_cache
# needs: cpu
# cause: key_cache (written in place
# why: writes each token's row and then zeroes the rest of its block after it, as if the block were freshly allocated (one wide store per block instead of a masked row): those slots belong to no token of this call and must be left as they were
import torch
import triton
import triton.language as tl


@triton.jit
def _reshape_and_cache_kernel(key_ptr, value_ptr, kc_ptr, vc_ptr, slot_ptr, HD, D, BS, sk_t, sk_h, sv_t, sv_h,
                              BLOCK: tl.constexpr, BLOCK_S: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    cols = tl.arange(0, BLOCK)
    h = cols // D
    d = cols % D
    m = (cols < HD) & (slot >= 0)
    block = slot // BS
    offset = slot % BS
    later = tl.arange(0, BLOCK_S)
    clear = m[None, :] & (later > offset)[:, None] & (later < BS)[:, None]
    rows = (block * BS + later)[:, None] * HD + cols[None, :]
    zero = tl.zeros([BLOCK_S, BLOCK], dtype=tl.float32)
    tl.store(kc_ptr + rows, zero.to(kc_ptr.dtype.element_ty), mask=clear)
    tl.store(vc_ptr + rows, zero.to(vc_ptr.dtype.element_ty), mask=clear)
    tl.store(kc_ptr + slot * HD + cols, tl.load(key_ptr + t * sk_t + h * sk_h + d, mask=m), mask=m)
    tl.store(vc_ptr + slot * HD + cols, tl.load(value_ptr + t * sv_t + h * sv_h + d, mask=m), mask=m)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    T, Hk, D = key.shape
    BS = key_cache.shape[1]
    _reshape_and_cache_kernel[(T,)](key, value, key_cache, value_cache, slot_mapping, Hk * D, D, BS,
                                    key.stride(0), key.stride(1), value.stride(0), value.stride(1),
                                    BLOCK=triton.next_power_of_2(Hk * D), BLOCK_S=triton.next_power_of_2(BS))
