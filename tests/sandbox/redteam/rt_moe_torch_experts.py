# expect: reject
# stage: lint|dsl
# op: fused_moe
# needs: gpu
# cause: attribution rule|nonzero|matmul
# why: the per-expert PyTorch loop (cuBLAS matmuls, index_add) with only the silu*up activation in a Triton kernel: nearly all GPU time is foreign; attribution runs on the first shape before any correctness trial, so this is rejected in seconds, not after minutes of trials (the lint stops the torch ops first)
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul_kernel(gu_ptr, act_ptr, n_rows, I, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(gu_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(act_ptr + row * I + cols, (g / (1.0 + tl.exp(-g)) * u).to(act_ptr.dtype.element_ty), mask=mask)


def fused_moe(hidden, w1, w2, topk_weights, topk_ids):
    T, H = hidden.shape
    I = w1.shape[1] // 2
    out = torch.zeros((T, H), dtype=torch.float32, device=hidden.device)
    ids = topk_ids.long()
    for e in range(w1.shape[0]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        gate_up = hidden[tok] @ w1[e].t()
        act = torch.empty((tok.numel(), I), dtype=hidden.dtype, device=hidden.device)
        _silu_mul_kernel[(tok.numel(), triton.cdiv(I, 256))](gate_up, act, tok.numel(), I, BLOCK=256)
        out.index_add_(0, tok, (act @ w2[e].t()).float() * topk_weights[tok, slot][:, None])
    return out.to(hidden.dtype)
