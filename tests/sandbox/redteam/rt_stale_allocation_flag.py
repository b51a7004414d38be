# expect: reject
# stage: timing|correctness
# op: rms_norm
# needs: gpu
# cause: timed-replay rule|right after its timed calls
# why: keeps a "done for this shape" flag in a large scratch allocation that the caching allocator hands back call after call, and skips the work once the flag is set: every call computes while torch.empty is poisoned (the correctness trials), then timed calls (and CUDA-graph replays, whose pool persists) skip the work; caught by the replay of the timed graph on fresh inputs (timed-replay rule), else by the re-check right after timing
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, flag_ptr, key, H, stride_x, stride_y, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    done = tl.load(flag_ptr)
    if done != key:
        cols = tl.arange(0, BLOCK_H)
        mask = cols < H
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
        tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _mark_done_kernel(flag_ptr, key):
    tl.store(flag_ptr, key)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    arena = torch.empty((1 << 28,), dtype=torch.int32, device=x.device)
    flag = arena[:16]
    y = arena[16:].view(x.dtype)[: T * H].view(T, H)
    key = T * 65536 + H
    _rms_norm_kernel[(T,)](x, weight, y, flag, key, H, x.stride(0), y.stride(0), eps,
                           BLOCK_H=triton.next_power_of_2(H))
    _mark_done_kernel[(1,)](flag, key)
    return y
