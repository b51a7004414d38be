# expect: reject
# stage: correctness
# op: per_token_group_quant_fp8
# needs: cpu
# cause: clamped away from 0
# why: DeepSeek's reference act_quant without the 1e-10 clamp: an all-zero group gets scale 0; the kernel writes zeros there instead of 0 / 0, so no NaN gives it away
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
    xg = tl.reshape(x, [BLOCK // G, G])
    scale = tl.max(tl.abs(xg), axis=1) / 448.0
    safe = tl.where(scale > 0, scale, 1.0)
    v = tl.minimum(tl.maximum(xg / safe[:, None], -448.0), 448.0)
    q = tl.reshape(_round_e4m3(v), [BLOCK])
    tl.store(q_ptr + row * H + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    groups = tl.arange(0, BLOCK // G)
    tl.store(s_ptr + row * (H // G) + groups, scale, mask=groups < H // G)


def per_token_group_quant_fp8(x, group_size=128):
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T, H // group_size), dtype=torch.float32, device=x.device)
    _per_token_group_quant_fp8_kernel[(T,)](x, xq, scale, H, x.stride(0), G=group_size,
                                            BLOCK=triton.next_power_of_2(H))
    return xq, scale
