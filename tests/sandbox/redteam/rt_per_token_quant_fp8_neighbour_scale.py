# expect: reject
# stage: correctness
# op: per_token_quant_fp8
# needs: cpu
# cause: scale of another row
# why: quantizes each row with its own scale but files that scale under the next row (an off-by-one in the scale's index): xq alone looks right, the scales dequantize every row with a neighbour's
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
def _per_token_quant_fp8_kernel(x_ptr, q_ptr, s_ptr, T, H, sx, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    scale = tl.maximum(amax / 448.0, 1.0 / 229376.0)
    tl.store(s_ptr + (row + 1) % T, scale)
    v = tl.minimum(tl.maximum(x / scale, -448.0), 448.0)
    tl.store(q_ptr + row * H + cols, _round_e4m3(v).to(q_ptr.dtype.element_ty), mask=mask)


def per_token_quant_fp8(x):
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T,), dtype=torch.float32, device=x.device)
    _per_token_quant_fp8_kernel[(T,)](x, xq, scale, T, H, x.stride(0), BLOCK=triton.next_power_of_2(H))
    return xq, scale
