# expect: reject
# stage: correctness
# op: rms_norm_quant_fp8
# needs: cpu
# cause: scale[
# why: takes the scale from the row before the weight (amax of x * rstd): one pass fewer over the weight in a chunked kernel; every scale is off by the weight's spread and the largest values clip at 448
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
    rms = tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0) / rms / 448.0, 1.0 / 229376.0)
    safe = scale
    v = tl.minimum(tl.maximum(y / safe, -448.0), 448.0)
    tl.store(q_ptr + row * H + cols, _round_e4m3(v).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


def rms_norm_quant_fp8(x, weight, eps=1e-6):
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T,), dtype=torch.float32, device=x.device)
    _rms_norm_quant_fp8_kernel[(T,)](x, weight, xq, scale, H, x.stride(0), eps, BLOCK=triton.next_power_of_2(H))
    return xq, scale
