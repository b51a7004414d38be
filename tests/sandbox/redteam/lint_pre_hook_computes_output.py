# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: a triton.Config pre_hook runs on the host before every launch with the real tensors; this one writes
# the output with PyTorch while the kernel does nothing; launch-time callbacks are launcher code
# cause: writes into a tensor from python
import torch
import triton
import triton.language as tl


def _fill(a):
    g, u = a["x_ptr"].chunk(2, dim=-1)
    a["out_ptr"][:] = g / (1 + 2.718281828459045 ** -g) * u


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, pre_hook=_fill)], key=["I"])
@triton.jit
def _noop_kernel(x_ptr, out_ptr, I, BLOCK: tl.constexpr):
    pass


def silu_and_mul(x):
    T, two_i = x.shape
    out = torch.empty((T, two_i // 2), device=x.device, dtype=x.dtype)
    _noop_kernel[(T,)](x, out, two_i // 2)
    return out
