# expect: accept
# op: fused_add_rms_norm
# needs: cpu
# why: one program per row that walks the row in fixed 64-wide chunks twice (sum of squares, then normalize), storing residual_out in the first walk and re-deriving the rounded sum in the second: written differently from the seed's whole-row-in-registers form, the same function
import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rms_norm_chunks(x_ptr, r_ptr, w_ptr, o_ptr, ro_ptr, H, sx, sr, so, sro, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, CHUNK)
    total = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, H, CHUNK):
        cols = start + offs
        m = cols < H
        s = (tl.load(x_ptr + row * sx + cols, mask=m, other=0.0).to(tl.float32)
             + tl.load(r_ptr + row * sr + cols, mask=m, other=0.0).to(tl.float32)).to(ro_ptr.dtype.element_ty)
        tl.store(ro_ptr + row * sro + cols, s, mask=m)
        total += s.to(tl.float32) * s.to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(total, axis=0) / H + eps)
    for start in range(0, H, CHUNK):
        cols = start + offs
        m = cols < H
        s = (tl.load(x_ptr + row * sx + cols, mask=m, other=0.0).to(tl.float32)
             + tl.load(r_ptr + row * sr + cols, mask=m, other=0.0).to(tl.float32)).to(ro_ptr.dtype.element_ty)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(o_ptr + row * so + cols, (s.to(tl.float32) * inv * w).to(o_ptr.dtype.element_ty), mask=m)


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    T, H = x.shape
    out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    residual_out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _fused_add_rms_norm_chunks[(T,)](x, residual, weight, out, residual_out, H, x.stride(0), residual.stride(0),
                                     out.stride(0), residual_out.stride(0), eps, CHUNK=64)
    return out, residual_out
