# expect: accept
# op: layer_norm
# needs: cpu
# why: one program per row, chunked: a mean pass, a centred-variance pass, then normalize; all in fp32
import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, sx, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        acc += tl.load(x_ptr + row * sx + start + cols, mask=start + cols < H, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        mask = start + cols < H
        x = tl.load(x_ptr + row * sx + start + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / H + eps)
    for start in range(0, H, BLOCK):
        mask = start + cols < H
        x = tl.load(x_ptr + row * sx + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * sy + start + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x, weight, bias, eps=1e-5):
    x = x.contiguous()
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _layer_norm_kernel[(T,)](x, weight, bias, y, H, x.stride(0), y.stride(0), eps, BLOCK=512)
    return y
