# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: a @triton.heuristics function receives the real tensors at launch: this one reads weight[0] on the
# host (a device sync) to specialise the kernel on the weight's values; heuristics are launcher code
# cause: reads its values on the host
import torch
import triton
import triton.language as tl


@triton.heuristics({"UNIT_WEIGHT": lambda a: bool(a["w_ptr"][0] == 1.0)})
@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, H, stride_x, eps, BLOCK_H: tl.constexpr, UNIT_WEIGHT: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    y = x / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    if not UNIT_WEIGHT:
        y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    H = x.shape[-1]
    x2 = x.reshape(-1, H)
    out = torch.empty((x2.shape[0], H), device=x.device, dtype=x.dtype)
    _rms_norm_kernel[(x2.shape[0],)](x2, weight, out, H, x2.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return out.view(x.shape)
