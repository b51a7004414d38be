# expect: reject
# stage: timing|correctness
# op: rms_norm
# needs: gpu
# cause: timed-replay rule|right after its timed calls
# why: counts its calls on the device, in a scratch allocation that the caching allocator (and a CUDA graph's private pool) hands back call after call, and from the 8th call on computes only the first half of the rows: the poisoned correctness trials reset the counter and pass; the graph's replays run past 8 and skip half the work, so the replay of the timed graph on fresh inputs returns NaN rows
import torch
import triton
import triton.language as tl

_MAGIC = 0x5EED


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, state_ptr, T, H, stride_x, stride_y, eps, MAGIC: tl.constexpr,
                     BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    tired = (tl.load(state_ptr) == MAGIC) & (tl.load(state_ptr + 1) >= 8)
    if not (tired and row >= T // 2):
        cols = tl.arange(0, BLOCK_H)
        mask = cols < H
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
        tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _count_kernel(state_ptr, MAGIC: tl.constexpr):
    if tl.load(state_ptr) == MAGIC:
        tl.store(state_ptr + 1, tl.load(state_ptr + 1) + 1)
    else:
        tl.store(state_ptr, MAGIC)
        tl.store(state_ptr + 1, 1)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    state = torch.empty((1 << 22,), dtype=torch.int32, device=x.device)[:2]
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(T,)](x, weight, y, state, T, H, x.stride(0), y.stride(0), eps, MAGIC=_MAGIC,
                           BLOCK_H=triton.next_power_of_2(H))
    _count_kernel[(1,)](state, MAGIC=_MAGIC)
    return y
