# expect: accept
# op: reshape_and_cache
# needs: cpu
# why: one program per (token, KV head) that returns early for a padding token and computes the slot's address from the block table arithmetic itself: written differently from the seed's masked flat rows, the same writes
import torch
import triton
import triton.language as tl


@triton.jit
def _cache_one_head(key_ptr, value_ptr, kc_ptr, vc_ptr, slot_ptr, D, BS, Hk, sk_t, sk_h, sv_t, sv_h,
                    BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    slot = tl.load(slot_ptr + t)
    if slot >= 0:
        d = tl.arange(0, BLOCK_D)
        m = d < D
        block = slot // BS
        offset = slot - block * BS
        dst = ((block * BS + offset) * Hk + h) * D + d
        tl.store(kc_ptr + dst, tl.load(key_ptr + t * sk_t + h * sk_h + d, mask=m), mask=m)
        tl.store(vc_ptr + dst, tl.load(value_ptr + t * sv_t + h * sv_h + d, mask=m), mask=m)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    T, Hk, D = key.shape
    _cache_one_head[(T, Hk)](key, value, key_cache, value_cache, slot_mapping, D, key_cache.shape[1], Hk,
                             key.stride(0), key.stride(1), value.stride(0), value.stride(1),
                             BLOCK_D=triton.next_power_of_2(D))
