# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: the kernel computes only 1/rms per row; the launcher scales the rows through lambdas kept in a
# table and called as OPS[key](...), which the lint cannot resolve and whose parameters get tensors
# cause: calls through a subscript
import torch
import triton
import triton.language as tl

OPS = {"scale": lambda a, b: a * b}


@triton.jit
def _inv_rms_kernel(x_ptr, r_ptr, H, stride_x, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < H, other=0.0).to(tl.float32)
    tl.store(r_ptr + row, 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps))


def rms_norm(x, weight, eps=1e-6):
    H = x.shape[-1]
    x2 = x.reshape(-1, H)
    r = torch.empty((x2.shape[0], 1), device=x.device, dtype=torch.float32)
    _inv_rms_kernel[(x2.shape[0],)](x2, r, H, x2.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    y = OPS["scale"](OPS["scale"](x2, r), weight)
    return y.view(x.shape)
