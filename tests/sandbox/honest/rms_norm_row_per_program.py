# expect: accept
# op: rms_norm
# needs: cpu
# why: one program per row, the whole row in one block: load bf16, reduce in fp32, store in x's dtype
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_out, H, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / H
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * w
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    H = x.shape[-1]
    x2 = x.reshape(-1, H)
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    T = x2.shape[0]
    out = torch.empty((T, H), device=x.device, dtype=x.dtype)
    BLOCK_H = triton.next_power_of_2(H)
    num_warps = min(max(BLOCK_H // 256, 1), 8)
    _rms_norm_kernel[(T,)](x2, weight, out, x2.stride(0), out.stride(0), H, eps,
                           BLOCK_H=BLOCK_H, num_warps=num_warps)
    return out.view(x.shape)
