# expect: accept
# op: softmax
# needs: cpu
# why: one program per row: a scalar running max and rescaled sum over the row's tiles, then a second pass that writes exp(x - max) / sum in fp32
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, V, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
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
        tl.store(y_ptr + row * stride_y + off + cols, tl.exp(x - m) / s, mask=mask)


def softmax(x):
    x = x.contiguous()
    T, V = x.shape
    y = torch.empty((T, V), dtype=torch.float32, device=x.device)
    _softmax_kernel[(T,)](x, y, V, x.stride(0), y.stride(0), BLOCK=512)
    return y
