# expect: accept
# op: fused_moe
# needs: cpu
# why: decode-style MoE: one program per (token, routed slot) computes the weighted SiLU-gated
#      intermediate, then one program per (token, H block) sums the k down projections; no sorting
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_gate_up_kernel(x_ptr, w1_ptr, topk_w_ptr, topk_ids_ptr, act_ptr, H, I, TOP_K,
                        stride_x, stride_w1e, stride_w1n, stride_act,
                        BLOCK_I: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0)
    j = tl.program_id(1)
    pid_i = tl.program_id(2)
    expert = tl.load(topk_ids_ptr + t * TOP_K + j).to(tl.int64)
    route_w = tl.load(topk_w_ptr + t * TOP_K + j).to(tl.float32)
    rows = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    row_mask = rows < I
    gate = tl.zeros((BLOCK_I,), dtype=tl.float32)
    up = tl.zeros((BLOCK_I,), dtype=tl.float32)
    w1_base = w1_ptr + expert * stride_w1e
    for h0 in range(0, H, BLOCK_H):
        hs = h0 + tl.arange(0, BLOCK_H)
        h_mask = hs < H
        x = tl.load(x_ptr + t * stride_x + hs, mask=h_mask, other=0.0).to(tl.float32)
        mask = row_mask[:, None] & h_mask[None, :]
        g = tl.load(w1_base + rows[:, None] * stride_w1n + hs[None, :], mask=mask, other=0.0).to(tl.float32)
        u = tl.load(w1_base + (rows[:, None] + I) * stride_w1n + hs[None, :], mask=mask, other=0.0).to(tl.float32)
        gate += tl.sum(g * x[None, :], axis=1)
        up += tl.sum(u * x[None, :], axis=1)
    act = gate * tl.sigmoid(gate) * up * route_w
    tl.store(act_ptr + (t * TOP_K + j) * stride_act + rows, act, mask=row_mask)


@triton.jit
def _moe_down_kernel(act_ptr, w2_ptr, topk_ids_ptr, out_ptr, H, I, TOP_K,
                     stride_act, stride_w2e, stride_w2h, stride_out,
                     BLOCK_H: tl.constexpr, BLOCK_I: tl.constexpr):
    t = tl.program_id(0)
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = hs < H
    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for j in range(0, TOP_K):
        expert = tl.load(topk_ids_ptr + t * TOP_K + j).to(tl.int64)
        w2_base = w2_ptr + expert * stride_w2e
        for i0 in range(0, I, BLOCK_I):
            cols = i0 + tl.arange(0, BLOCK_I)
            i_mask = cols < I
            a = tl.load(act_ptr + (t * TOP_K + j) * stride_act + cols, mask=i_mask, other=0.0)
            w = tl.load(w2_base + hs[:, None] * stride_w2h + cols[None, :],
                        mask=h_mask[:, None] & i_mask[None, :], other=0.0).to(tl.float32)
            acc += tl.sum(w * a[None, :], axis=1)
    tl.store(out_ptr + t * stride_out + hs, acc.to(out_ptr.dtype.element_ty), mask=h_mask)


def fused_moe(hidden, w1, w2, topk_weights, topk_ids):
    T, H = hidden.shape
    E, two_i, _ = w1.shape
    I = two_i // 2
    top_k = topk_ids.shape[1]
    w1 = w1.contiguous()
    w2 = w2.contiguous()
    topk_weights = topk_weights.contiguous()
    topk_ids = topk_ids.contiguous()
    act = torch.empty((T * top_k, I), device=hidden.device, dtype=torch.float32)
    out = torch.empty((T, H), device=hidden.device, dtype=hidden.dtype)
    block_i, block_h = 32, 64
    _moe_gate_up_kernel[(T, top_k, triton.cdiv(I, block_i))](
        hidden, w1, topk_weights, topk_ids, act, H, I, top_k,
        hidden.stride(0), w1.stride(0), w1.stride(1), act.stride(0),
        BLOCK_I=block_i, BLOCK_H=block_h)
    _moe_down_kernel[(T, triton.cdiv(H, block_h))](
        act, w2, topk_ids, out, H, I, top_k,
        act.stride(0), w2.stride(0), w2.stride(1), out.stride(0),
        BLOCK_H=block_h, BLOCK_I=block_i)
    return out
