# expect: reject
# stage: correctness
# op: rms_norm_quant_fp8
# needs: cpu
# cause: clamped away from 0
# why: scale = amax(|y|) / 448 without vLLM's floor: an all-zero padding row normalizes to zeros and gets scale 0; the kernel writes zeros there instead of 0 / 0, so no NaN gives it away
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
def _rms_norm_quant_fp8_kernel(x_ptr, w_ptr, q_ptr, s_ptr, H, sx, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x / tl.sqrt(tl.sum(x * x, axis=0) / H + eps) * w
    scale = tl.max(tl.abs(y), axis=0) / 448.0
    safe = tl.where(scale > 0, scale, 1.0)
    v = tl.minimum(tl.maximum(y / safe, -448.0), 448.0)
    tl.store(q_ptr + row * H + cols, _round_e4m3(v).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


def rms_norm_quant_fp8(x, weight, eps=1e-6):
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T,), dtype=torch.float32, device=x.device)
    _rms_norm_quant_fp8_kernel[(T,)](x, weight, xq, scale, H, x.stride(0), eps, BLOCK=triton.next_power_of_2(H))
    return xq, scale
