# expect: accept
# op: per_token_group_quant_fp8
# needs: cpu
# why: written differently from the seed: a 2D grid (row, group), one 128-channel group per program, the
#   scale as amax * (1/448), the quotient as x * (1 / scale), rounding onto the e4m3fn grid by integer
#   arithmetic on the fp32 bits (normal range) and a magic-number add (subnormals)
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
def _per_token_group_quant_fp8_kernel(x_ptr, q_ptr, s_ptr, H, n_groups, sx, sxc, G: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    cols = grp * G + tl.arange(0, G)
    x = tl.load(x_ptr + row * sx + cols * sxc).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) * (1.0 / 448.0)
    tl.store(s_ptr + row * n_groups + grp, scale)
    v = tl.minimum(tl.maximum(x * (1.0 / scale), -448.0), 448.0)
    tl.store(q_ptr + row * H + cols, _to_e4m3_grid(v).to(q_ptr.dtype.element_ty))


def per_token_group_quant_fp8(x, group_size=128):
    T, H = x.shape
    n_groups = H // group_size
    xq = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T, n_groups), dtype=torch.float32, device=x.device)
    _per_token_group_quant_fp8_kernel[(T, n_groups)](x, xq, scale, H, n_groups, x.stride(0), x.stride(1),
                                                     G=group_size)
    return xq, scale
