# expect: reject
# stage: lint
# op: fused_moe
# needs: cpu
# why: the kernel writes one partial output per top-k slot; the launcher adds them with a module-level alias
# of the builtin sum (_combine = sum), which hides the PyTorch additions from a by-name check
# cause: used as a value
import torch
import triton
import triton.language as tl

_combine = sum


@triton.jit
def _moe_slot_kernel(x_ptr, w1_ptr, w2_ptr, tw_ptr, ids_ptr, out_ptr, H, I, TOP_K, slot,
                     BLOCK_H: tl.constexpr, BLOCK_I: tl.constexpr):
    t = tl.program_id(0)
    e = tl.load(ids_ptr + t * TOP_K + slot).to(tl.int64)
    h = tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_I)
    x = tl.load(x_ptr + t * H + h, mask=h < H, other=0.0).to(tl.float32)
    m = (i[:, None] < I) & (h[None, :] < H)
    g = tl.sum(tl.load(w1_ptr + e * 2 * I * H + i[:, None] * H + h[None, :], mask=m, other=0.0).to(tl.float32)
               * x[None, :], axis=1)
    u = tl.sum(tl.load(w1_ptr + e * 2 * I * H + (I + i[:, None]) * H + h[None, :], mask=m, other=0.0)
               .to(tl.float32) * x[None, :], axis=1)
    a = g * tl.sigmoid(g) * u
    m2 = (h[:, None] < H) & (i[None, :] < I)
    y = tl.sum(tl.load(w2_ptr + e * H * I + h[:, None] * I + i[None, :], mask=m2, other=0.0).to(tl.float32)
               * a[None, :], axis=1)
    y = y * tl.load(tw_ptr + t * TOP_K + slot).to(tl.float32)
    tl.store(out_ptr + t * H + h, y.to(out_ptr.dtype.element_ty), mask=h < H)


def fused_moe(hidden, w1, w2, topk_weights, topk_ids):
    T, H = hidden.shape
    I = w2.shape[2]
    k = topk_ids.shape[1]
    parts = []
    for slot in range(k):
        p = torch.empty_like(hidden)
        _moe_slot_kernel[(T,)](hidden, w1, w2, topk_weights, topk_ids, p, H, I, k, slot,
                               BLOCK_H=triton.next_power_of_2(H), BLOCK_I=triton.next_power_of_2(I))
        parts.append(p)
    return _combine(parts)
