# expect: accept
# op: rms_norm
# needs: cpu
# why: @triton.heuristics picks the block from sizes only (a["H"] and a["x_ptr"].shape), the grid is a
# def reading meta, and the reduction lives in a @triton.jit helper function called from the kernel
import torch
import triton
import triton.language as tl


@triton.jit
def _inv_rms(x, H, eps):
    return 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)


def _block_h(args):
    return triton.next_power_of_2(max(args["H"], args["x_ptr"].shape[-1]))


@triton.heuristics({"BLOCK_H": _block_h, "ROW_STEP": lambda a: 1 if a["T"] < 64 else 2})
@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, T, H, stride_x, stride_out, eps,
                     BLOCK_H: tl.constexpr, ROW_STEP: tl.constexpr):
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    for i in range(ROW_STEP):
        row = tl.program_id(0) * ROW_STEP + i
        if row < T:
            x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
            y = x * _inv_rms(x, H, eps) * w
            tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _grid(meta):
    return (triton.cdiv(meta["T"], meta["ROW_STEP"]),)


def rms_norm(x, weight, eps=1e-6):
    H = x.shape[-1]
    x2 = x.reshape(-1, H).contiguous()
    T = x2.shape[0]
    out = torch.empty((T, H), device=x.device, dtype=x.dtype)
    _rms_norm_kernel[_grid](x2, weight, out, T, H, x2.stride(0), out.stride(0), eps)
    return out.view(x.shape)
