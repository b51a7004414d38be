# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: caches outputs by shape in a dict inside CONFIGS, updated in place (|=) through a helper default argument
import torch
import triton
import triton.language as tl

CONFIGS = {"BLOCK": 1024, "memo": {}}


@triton.jit
def _rms_norm_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _remember(key, y, store=CONFIGS["memo"]):
    store |= {key: y}
    return y


def rms_norm(x, weight, eps=1e-6):
    y = torch.empty_like(x)
    _rms_norm_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=CONFIGS["BLOCK"])
    return _remember(tuple(x.shape), y)
