# expect: reject
# stage: correctness
# op: layer_norm
# needs: cpu
# cause: exceed
# why: never reads the bias because the model the hot shapes come from (Command R7B) has none: the operator's contract has a bias, and it is not zero
import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, y_ptr, H, sx, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / H
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + cols, (d * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x, weight, bias, eps=1e-5):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _layer_norm_kernel[(T,)](x, weight, y, H, x.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(H))
    return y
