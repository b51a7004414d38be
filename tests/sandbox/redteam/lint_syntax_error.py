# expect: reject
# stage: lint
# op: rms_norm
# needs: cpu
# why: the file does not parse (an unclosed bracket), so nothing can run
import torch
import triton
import triton.language as tl


def rms_norm(x, weight, eps=1e-6):
    out = torch.empty_like(x
    return out
