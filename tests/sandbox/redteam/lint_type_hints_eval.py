# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: typing.get_type_hints evaluates string annotations, so a string reaches __import__ without the
# name appearing in code; typing is allowed by name (annotations and cast), not as a module
# cause: get_type_hints
import typing

import torch
import triton
import triton.language as tl


def _probe(flag: "__import__('torch').nn.functional.silu"):
    return flag


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def silu_and_mul(x):
    T, two_i = x.shape
    gate, up = x.chunk(2, dim=-1)
    out = torch.empty((T, two_i // 2), device=x.device, dtype=x.dtype)
    silu = typing.get_type_hints(_probe)["flag"]
    staged = silu(gate).mul(up).contiguous()
    _copy_kernel[(triton.cdiv(staged.numel(), 1024),)](staged, out, staged.numel(), BLOCK=1024)
    return out
