# expect: accept
# op: per_token_quant_fp8
# needs: cpu
# why: written differently from the seed: one row per program in 128-column chunks (amax pass, then quantize
#   pass), the scale by multiplication with 1/448, the quotient as x * (1 / scale), and the rounding onto the
#   e4m3fn grid by integer arithmetic on the fp32 bits (normal range) and a magic-number add (subnormals);
#   its fp32 roundings differ from the reference's, so a few elements at rounding midpoints flip by one step
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
def _per_token_quant_fp8_kernel(x_ptr, q_ptr, s_ptr, H, sx, sxc, CHUNK: tl.constexpr, N_CHUNKS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, CHUNK)
    amax = 0.0
    for c in range(N_CHUNKS):
        cc = c * CHUNK + cols
        x = tl.load(x_ptr + row * sx + cc * sxc, mask=cc < H, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=0))
    scale = tl.maximum(amax * (1.0 / 448.0), 1.0 / 229376.0)
    tl.store(s_ptr + row, scale)
    inv = 1.0 / scale
    for c in range(N_CHUNKS):
        cc = c * CHUNK + cols
        m = cc < H
        x = tl.load(x_ptr + row * sx + cc * sxc, mask=m, other=0.0).to(tl.float32)
        v = tl.minimum(tl.maximum(x * inv, -448.0), 448.0)
        tl.store(q_ptr + row * H + cc, _to_e4m3_grid(v).to(q_ptr.dtype.element_ty), mask=m)


def per_token_quant_fp8(x):
    T, H = x.shape
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T,), dtype=torch.float32, device=x.device)
    _per_token_quant_fp8_kernel[(T,)](x, xq, scale, H, x.stride(0), x.stride(1), CHUNK=128,
                                      N_CHUNKS=triton.cdiv(H, 128))
    return xq, scale
