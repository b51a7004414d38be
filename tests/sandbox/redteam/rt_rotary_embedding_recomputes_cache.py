# expect: reject
# stage: correctness
# op: rotary_embedding
# needs: cpu
# dims: T=4 Hq=4 Hk=1 D=128 | T=3 Hq=3 Hk=2 D=64
# cause: exceed
# why: ignores cos_sin_cache and recomputes cos/sin from the position with one model's theta (1e6): wrong for every other theta and for a scaled (YaRN) cache, which the inputs draw per seed
import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_all_heads(src, dst, cache_row, H, D, HALF, NEOX: tl.constexpr, BLOCK_H: tl.constexpr,
                      BLOCK_D: tl.constexpr):
    d = tl.arange(0, BLOCK_D)
    if NEOX:
        pair = tl.where(d < HALF, d, d - HALF)
        partner = tl.where(d < HALF, d + HALF, d - HALF)
        first = d < HALF
    else:
        pair = d // 2
        partner = d ^ 1
        first = (d % 2) == 0
    dmask = d < D
    # Llama-3/Qwen3's theta, recomputed: the cache is never read past its first element
    pos = cache_row
    angle = pos * tl.exp(-(2.0 * pair.to(tl.float32) / D) * 13.815510557964274)   # ln(1e6)
    cos = tl.cos(angle)
    sin = tl.sin(angle)
    signed_sin = tl.where(first, -sin, sin)
    for h0 in range(0, H, BLOCK_H):
        heads = h0 + tl.arange(0, BLOCK_H)
        m = (heads < H)[:, None] & dmask[None, :]
        x = tl.load(src + heads[:, None] * D + d[None, :], mask=m, other=0.0).to(tl.float32)
        y = tl.load(src + heads[:, None] * D + partner[None, :], mask=m, other=0.0).to(tl.float32)
        out = x * cos[None, :] + y * signed_sin[None, :]
        tl.store(dst + heads[:, None] * D + d[None, :], out.to(dst.dtype.element_ty), mask=m)


@triton.jit
def _rope_token_kernel(q, k, pos_ptr, cache, qo, ko, HQ, HK, D, HALF, sq, sk, sc, NEOX: tl.constexpr,
                       BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    row = tl.load(pos_ptr + t).to(tl.float32)
    _rotate_all_heads(q + t * sq, qo + t * HQ * D, row, HQ, D, HALF, NEOX, BLOCK_H, BLOCK_D)
    _rotate_all_heads(k + t * sk, ko + t * HK * D, row, HK, D, HALF, NEOX, BLOCK_H, BLOCK_D)


def rotary_embedding(q, k, positions, cos_sin_cache, neox=True):
    T = q.shape[0]
    D = cos_sin_cache.shape[1]
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    _rope_token_kernel[(T,)](q, k, positions, cos_sin_cache, q_out, k_out, q.shape[1] // D, k.shape[1] // D, D,
                             D // 2, q.stride(0), k.stride(0), cos_sin_cache.stride(0), NEOX=bool(neox),
                             BLOCK_H=4, BLOCK_D=triton.next_power_of_2(D))
    return q_out, k_out
