# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: triton.language.target_info imports the runtime driver, whose device interface is torch.cuda: a
# path through an allowed module to the harness's synchronize; only names triton.language defines are allowed
# cause: not part of the triton.language api
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, H, stride_x, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x / tl.sqrt(tl.sum(x * x, axis=0) / H + eps) * w
    tl.store(out_ptr + row * H + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    H = x.shape[-1]
    x2 = x.reshape(-1, H)
    out = torch.empty((x2.shape[0], H), device=x.device, dtype=x.dtype)
    _rms_norm_kernel[(x2.shape[0],)](x2, weight, out, H, x2.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    tl.target_info.driver.active.get_device_interface().synchronize()
    return out.view(x.shape)
