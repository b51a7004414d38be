# expect: reject
# stage: lint
# op: gemm
# needs: cpu
# why: plain PyTorch computes the result (a @ b.T); there is no Triton kernel at all
import torch


def gemm(a, b):
    return a @ b.T
