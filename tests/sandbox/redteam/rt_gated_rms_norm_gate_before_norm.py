# expect: reject
# stage: correctness
# op: gated_rms_norm
# needs: cpu
# cause: exceed
# why: reuses a Mamba2-style kernel that gates first and normalizes x * silu(z) (norm_before_gate=False): the same inputs and cost, a different function
import torch
import triton
import triton.language as tl


@triton.jit
def _gated_rms_norm_kernel(x_ptr, z_ptr, w_ptr, y_ptr, H, sx, sz, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + row * sz + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    g = x * (z / (1.0 + tl.exp(-z)))
    rstd = 1.0 / tl.sqrt(tl.sum(g * g, axis=0) / H + eps)
    tl.store(y_ptr + row * sy + cols, (g * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def gated_rms_norm(x, z, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _gated_rms_norm_kernel[(T,)](x, z, weight, y, H, x.stride(0), z.stride(0), y.stride(0), eps,
                                 BLOCK=triton.next_power_of_2(H))
    return y
