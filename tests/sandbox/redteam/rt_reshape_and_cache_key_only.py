# expect: reject
# stage: correctness
# op: reshape_and_cache
# needs: cpu
# cause: value_cache (written in place
# why: writes only the key cache (half the bytes, half the time): the call returns None either way, so only comparing the second mutated argument shows the values were never cached
import torch
import triton
import triton.language as tl


@triton.jit
def _reshape_and_cache_kernel(key_ptr, kc_ptr, slot_ptr, HD, D, sk_t, sk_h, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    cols = tl.arange(0, BLOCK)
    m = (cols < HD) & (slot >= 0)
    tl.store(kc_ptr + slot * HD + cols, tl.load(key_ptr + t * sk_t + (cols // D) * sk_h + cols % D, mask=m), mask=m)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    T, Hk, D = key.shape
    _reshape_and_cache_kernel[(T,)](key, key_cache, slot_mapping, Hk * D, D, key.stride(0), key.stride(1),
                                    BLOCK=triton.next_power_of_2(Hk * D))
