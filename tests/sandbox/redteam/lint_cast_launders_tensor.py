# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: typing.cast returns its argument: the kernel only computes sigmoid(gate), and the launcher multiplies
# laundered tensors (cast to "int") in PyTorch; provenance must flow through every call
# cause: arithmetic on tensors
import typing

import torch
import triton
import triton.language as tl


@triton.jit
def _sigmoid_kernel(x_ptr, s_ptr, I, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(s_ptr + row * I + cols, tl.sigmoid(g).to(s_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, two_i = x.shape
    I = two_i // 2
    s = torch.empty((T, I), device=x.device, dtype=x.dtype)
    _sigmoid_kernel[(T,)](x, s, I, x.stride(0), BLOCK=triton.next_power_of_2(I))
    gate, up = x.chunk(2, dim=-1)
    g = typing.cast(int, gate)
    u = typing.cast(int, up)
    sig = typing.cast(int, s)
    return g * sig * u
