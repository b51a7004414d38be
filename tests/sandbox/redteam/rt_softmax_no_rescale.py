# expect: reject
# stage: correctness
# op: softmax
# needs: cpu
# cause: exceed
# why: an online softmax that keeps the running max but never rescales the running sum when the max grows (saves one exp per tile): exact only while the first tile holds the row's maximum
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
        m = tl.maximum(m, tl.max(x, axis=0))
        s += tl.sum(tl.exp(x - m), axis=0)
    for off in range(0, V, BLOCK):
        mask = off + cols < V
        x = tl.load(x_ptr + row * stride_x + off + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + row * stride_y + off + cols, tl.exp(x - m) / s, mask=mask)


def softmax(x):
    T, V = x.shape
    y = torch.empty((T, V), dtype=torch.float32, device=x.device)
    _softmax_kernel[(T,)](x, y, V, x.stride(0), y.stride(0), BLOCK=512)
    return y
