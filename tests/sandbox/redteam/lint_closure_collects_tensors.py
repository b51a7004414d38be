# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: a closure appends tensors to a list of the enclosing function; arithmetic on the list's elements is
# PyTorch compute (a container is tensor-derived once anything stores a tensor into it)
# cause: arithmetic on tensors
import torch
import triton
import triton.language as tl


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
    held = []

    def keep(*ts):
        held.extend(ts)

    keep(x2, r, weight)
    return (held[0] * held[1] * held[2]).view(x.shape)
