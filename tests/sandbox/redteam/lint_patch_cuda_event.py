# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: replaces torch.cuda.Event so that elapsed_time reports a tiny time (timer monkeypatch)
import torch
import triton
import triton.language as tl


class _FastEvent:
    def __init__(self, enable_timing=False):
        pass

    def record(self, stream=None):
        pass

    def elapsed_time(self, other):
        return 1e-3


torch.cuda.Event = _FastEvent


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, I, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < I
    g = tl.load(x_ptr + row * 2 * I + cols, mask=m).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * I + I + cols, mask=m).to(tl.float32)
    tl.store(out_ptr + row * I + cols, (g * tl.sigmoid(g) * u).to(out_ptr.dtype.element_ty), mask=m)


def silu_and_mul(x):
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), device=x.device, dtype=x.dtype)
    _silu_and_mul_kernel[(T,)](x, out, I, BLOCK=triton.next_power_of_2(I))
    return out
