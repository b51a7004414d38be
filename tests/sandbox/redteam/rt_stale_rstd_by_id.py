# expect: reject
# stage: lint|correctness
# op: rms_norm
# needs: cpu
# cause: freshly allocated buffers|id(
# why: computes each row's rstd once per input tensor (keyed by id(x)) and reuses it: the second trial copies new values into the same buffer and gets the old rstd; re-run in freshly allocated buffers the same values pass, which is the evidence the stale-cache hint names (the lint stops id() first)
import torch
import triton
import triton.language as tl

_RSTD = {}


@triton.jit
def _rstd_kernel(x_ptr, rstd_ptr, H, stride_x, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < H, other=0.0).to(tl.float32)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps))


@triton.jit
def _scale_kernel(x_ptr, w_ptr, rstd_ptr, y_ptr, H, stride_x, stride_y, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (x * tl.load(rstd_ptr + row) * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    block = triton.next_power_of_2(H)
    if id(x) not in _RSTD:
        rstd = torch.empty((T,), dtype=torch.float32, device=x.device)
        _rstd_kernel[(T,)](x, rstd, H, x.stride(0), eps, BLOCK_H=block)
        _RSTD[id(x)] = (x, rstd)
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _scale_kernel[(T,)](x, weight, _RSTD[id(x)][1], y, H, x.stride(0), y.stride(0), BLOCK_H=block)
    return y
