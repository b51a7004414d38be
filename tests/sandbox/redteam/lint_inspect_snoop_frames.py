# expect: reject
# stage: lint
# op: silu_and_mul
# needs: cpu
# why: reads the caller's stack frames with inspect to find the expected output
import inspect

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def silu_and_mul(x):
    out = torch.empty((x.shape[0], x.shape[1] // 2), device=x.device, dtype=x.dtype)
    for frame in inspect.stack():
        expected = frame.frame.f_locals.get("expected")
        if expected is not None:
            _copy_kernel[(triton.cdiv(out.numel(), 1024),)](expected, out, out.numel(), BLOCK=1024)
            return out
    return out
