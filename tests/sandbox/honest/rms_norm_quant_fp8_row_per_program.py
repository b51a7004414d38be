# expect: accept
# op: rms_norm_quant_fp8
# needs: cpu
# why: written differently from the seed: one row per program, y = x * rstd * weight materialized and its amax
#   taken directly (the seed takes rstd * amax|x * weight|), y / scale by division, rounding onto the e4m3fn
#   grid by integer arithmetic on the fp32 bits (normal range) and a magic-number add (subnormals)
import torch
import triton
import triton.language as tl


@triton.jit
def _to_e4m3_grid(v):
    # Normal range (|v| >= 2^-6): round the fp32 mantissa to 3 bits, ties to even, on the bit pattern (the
    # carry runs into the exponent by itself). Subnormals: adding 1.5 * 2^14 rounds to a multiple of 2^-9.
    bits = v.to(tl.int32, bitcast=True)
    lsb = (bits >> 20) & 1
    normal = ((bits + 0x7FFFF + lsb) & -1048576).to(tl.float32, bitcast=True)
    sub = (v + 24576.0) - 24576.0
    return tl.where(tl.abs(v) >= 0.015625, normal, sub)


@triton.jit
def _rms_norm_quant_fp8_kernel(x_ptr, w_ptr, q_ptr, s_ptr, H, sx, sxc, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    x = tl.load(x_ptr + row * sx + cols * sxc, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    y = x * rstd * w
    scale = tl.maximum(tl.max(tl.abs(y), axis=0) / 448.0, 1.0 / 229376.0)
    tl.store(s_ptr + row, scale)
    v = tl.minimum(tl.maximum(y / scale, -448.0), 448.0)
    tl.store(q_ptr + row * H + cols, _to_e4m3_grid(v).to(q_ptr.dtype.element_ty), mask=m)


def rms_norm_quant_fp8(x, weight, eps=1e-6):
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T,), dtype=torch.float32, device=x.device)
    _rms_norm_quant_fp8_kernel[(T,)](x, weight, xq, scale, H, x.stride(0), x.stride(1), eps,
                                     BLOCK=triton.next_power_of_2(H))
    return xq, scale
