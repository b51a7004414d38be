# expect: reject
# stage: correctness
# op: softmax
# needs: cpu
# cause: exceed
# why: computes exp(x - max) in fp16 to halve register traffic, then widens to the fp32 output: probabilities below fp16's 6e-8 flush to zero and the rest carry 5e-4 relative error, where a sampler's tail needs fp32
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, V, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = float("-inf")
    s = 0.0
    for off in range(0, V, BLOCK):
        x = tl.load(x_ptr + row * stride_x + off + cols, mask=off + cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for off in range(0, V, BLOCK):
        mask = off + cols < V
        x = tl.load(x_ptr + row * stride_x + off + cols, mask=mask, other=float("-inf")).to(tl.float32)
        p = (tl.exp(x - m) / s).to(tl.float16)
        tl.store(y_ptr + row * stride_y + off + cols, p.to(tl.float32), mask=mask)


def softmax(x):
    T, V = x.shape
    y = torch.empty((T, V), dtype=torch.float32, device=x.device)
    _softmax_kernel[(T,)](x, y, V, x.stride(0), y.stride(0), BLOCK=512)
    return y
