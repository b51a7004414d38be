# expect: reject
# stage: correctness
# op: per_token_group_quant_fp8
# needs: cpu
# cause: scale[
# why: one scale per row (the row's amax / 448) written into every group's slot: a per-token quantizer in the group layout; groups without the outlier channel lose most of their precision
import torch
import triton
import triton.language as tl


@triton.jit
def _round_e4m3(v):
    # nearest e4m3fn value, ties to even, in exact fp32 (Triton's CPU interpreter cannot cast to fp8)
    e = tl.maximum(((v.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)
    step = ((e + 124) << 23).to(tl.float32, bitcast=True)
    inv_step = ((130 - e) << 23).to(tl.float32, bitcast=True)
    return ((v * inv_step + 12582912.0) - 12582912.0) * step


@triton.jit
def _per_token_group_quant_fp8_kernel(x_ptr, q_ptr, s_ptr, H, sx, G: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0
    v = tl.minimum(tl.maximum(x / scale, -448.0), 448.0)
    tl.store(q_ptr + row * H + cols, _round_e4m3(v).to(q_ptr.dtype.element_ty), mask=mask)
    groups = tl.arange(0, BLOCK // G)
    tl.store(s_ptr + row * (H // G) + groups, tl.zeros([BLOCK // G], dtype=tl.float32) + scale,
             mask=groups < H // G)


def per_token_group_quant_fp8(x, group_size=128):
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T, H // group_size), dtype=torch.float32, device=x.device)
    _per_token_group_quant_fp8_kernel[(T,)](x, xq, scale, H, x.stride(0), G=group_size,
                                            BLOCK=triton.next_power_of_2(H))
    return xq, scale
