# expect: reject
# stage: correctness|lint
# op: rms_norm
# needs: cpu
# cause: stale|cache
# why: caches outputs by (T, H, dtype) in the module-level CONFIGS dict, merged in place (|=) through a helper's default argument; the second trial, with fresh values in the same buffers, gets the stale output (if the lint learns this form, it stops it first)
import torch
import triton
import triton.language as tl

CONFIGS = {"num_warps": 4}


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _remember(key, y, store=CONFIGS):
    store |= {key: y}


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    got = CONFIGS.get((T, H, x.dtype))
    if got is not None:
        return got
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(T,)](x, weight, y, H, x.stride(0), y.stride(0), eps, BLOCK_H=triton.next_power_of_2(H),
                           num_warps=CONFIGS["num_warps"])
    _remember((T, H, x.dtype), y)
    return y
