# expect: reject
# stage: correctness
# op: reshape_and_cache
# needs: cpu
# cause: key_cache (written in place
# why: clamps the slot to >= 0 instead of skipping padding tokens (slot -1), so every padded token of a CUDA-graph batch overwrites slot 0 of the null block: no out-of-bounds address, but a slot outside the mapping changes
import torch
import triton
import triton.language as tl


@triton.jit
def _reshape_and_cache_kernel(key_ptr, value_ptr, kc_ptr, vc_ptr, slot_ptr, HD, D, sk_t, sk_h, sv_t, sv_h,
                              BLOCK: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.maximum(tl.load(slot_ptr + t), 0)
    cols = tl.arange(0, BLOCK)
    h = cols // D
    d = cols % D
    m = cols < HD
    tl.store(kc_ptr + slot * HD + cols, tl.load(key_ptr + t * sk_t + h * sk_h + d, mask=m), mask=m)
    tl.store(vc_ptr + slot * HD + cols, tl.load(value_ptr + t * sv_t + h * sv_h + d, mask=m), mask=m)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    T, Hk, D = key.shape
    _reshape_and_cache_kernel[(T,)](key, value, key_cache, value_cache, slot_mapping, Hk * D, D,
                                    key.stride(0), key.stride(1), value.stride(0), value.stride(1),
                                    BLOCK=triton.next_power_of_2(Hk * D))
