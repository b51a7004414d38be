"""Softmax over the vocabulary of sampling logits: the reference, seeded logits, the work model and where
a serving engine calls it.

p = exp(x - max(x)) / sum(exp(x - max(x))) over the last dimension, computed and stored in fp32.
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import row_dims, row_holdout_dims, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "softmax"
SIGNATURE = "softmax(x[T,V]) -> [T,V] fp32"
ARGS = ("x",)
DESCRIPTION = (
    "Softmax over the vocabulary of each row of next-token logits, as a sampler computes before top-k/top-p "
    "and sampling: p[t, v] = exp(x[t, v] - m_t) / sum_u exp(x[t, u] - m_t) with m_t = max_u x[t, u]. x is "
    "[T, V] in bf16, fp16 or fp32 (T sequences, V the vocabulary: 32000 to 201088, never a power of two); "
    "the output is a new contiguous [T, V] float32 tensor whatever the input dtype. Compute in fp32. "
    "Rows are too wide for one block of registers: an online softmax (a running max and a rescaled "
    "running sum) or a split over several programs per row is needed; with T as small as 1 in decode, one "
    "program per row leaves most of the GPU idle. Logits look like a trained LM head's: a broad N(0, 3^2) "
    "body and a few tokens 10-25 above it, so probabilities range from about 1e-20 to near 1. x may have "
    "a row stride larger than V."
)

# fp32 output of fp32 math whatever the input dtype. An honest kernel differs from torch by the exp's
# rounding (relative ~|x - m| * 2^-24 for an exp2-based exp, |x - m| up to ~45 here: ~3e-6) and the
# summation order (~1e-6 relative on the normalizer). rtol 1e-4 leaves 30x of that; atol 1e-9 is far
# below the typical probability 1/V (5e-6 at V=201088), so zeroed or fp16-rounded small probabilities
# fail. A softmax that forgets to rescale the running sum is off by factors of e^(max jump): >> bounds.
_FP32_OUT = Tolerance(atol=1e-9, rtol=1e-4, rel_l2=1e-5)
TOLERANCES = {"bf16": _FP32_OUT, "fp16": _FP32_OUT, "fp32": _FP32_OUT}

LOGIT_STD = 3.0
TOP_TOKENS = 8                   # tokens per row lifted above the body (the plausible next tokens)
TOP_LIFT = (10.0, 25.0)          # by this much
HOLDOUT_MAX_T = 1024
_INTERP_MAX_T, _INTERP_MAX_V = 4, 4096


def _dims(dims) -> tuple[int, int]:
    return row_dims(NAME, dims, row="T", col="V")


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, V = _dims(dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = LOGIT_STD * torch.randn(T, V, generator=gen, device=device, dtype=torch.float32)
    k = min(TOP_TOKENS, V)
    top = torch.randint(0, V, (T, k), generator=gen, device=device)
    lo, hi = TOP_LIFT
    x.scatter_add_(1, top, lo + (hi - lo) * torch.rand(T, k, generator=gen, device=device, dtype=torch.float32))
    return {"x": x.to(torch_dtype(NAME, dtype))}


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1).float()


def baseline(x: torch.Tensor) -> torch.Tensor:
    """What a user runs instead: a sampler's torch.softmax(logits, dim=-1, dtype=torch.float32)."""
    return torch.softmax(x, dim=-1, dtype=torch.float32)


def baseline_liger(x: torch.Tensor) -> torch.Tensor:
    """Liger-Kernel 0.8.5's softmax as a sampler would call it for fp32 probabilities: on the logits cast to
    fp32, since Liger writes the input's dtype and bf16 probabilities (2^-9 relative) miss this contract's
    rtol 1e-4. Liger keeps a whole row in one block and refuses rows wider than 65536 ("Cannot launch Triton
    kernel since n = ... exceeds the recommended Triton blocksize = 65536"): every hot shape here has
    V >= 128256, so there it fails; it runs on the V = 32000 shapes, none of them hot. The optional liger_kernel
    package is imported only here."""
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    return LigerSoftmaxFunction.apply(x.float())


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    T, V = _dims(dims)
    torch_dtype(NAME, dtype)
    return (T, V), "fp32"


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 5 FLOPs per element (max compare, subtract, exp, add into the sum, multiply by 1/sum) on the fp32
    peak. Q: x read once in its dtype, p written once in fp32 (a two-pass kernel reads x twice: 8 bytes an
    element for bf16 input against Q's 6)."""
    T, V = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 5.0 * T * V}, float(T * V * (b + 4))


def interpreter_dims(dims) -> dict[str, int]:
    """Rows scaled to at most 4, V to a non-power-of-two 2500..2563 (several of a seed's 1024-wide tiles)."""
    T, V = _dims(dims)
    return {"T": scale_down(T, _INTERP_MAX_T, 3), "V": scale_down(V, _INTERP_MAX_V, 2500 + V % 64)}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, row="T", col="V", default_cols=151936, max_rows=HOLDOUT_MAX_T)


def occurrences(model_cfg: dict, tp: int, tokens: int, phase: str = "decode") -> list[tuple[dict[str, int], int]]:
    """One softmax per forward pass over the full vocabulary (logits are gathered across TP before
    sampling, and every TP rank samples the same tokens), one row per sequence that samples: every decode
    token, and max(1, tokens / 2048) rows for a prefill chunk (model_calls.sampled_rows)."""
    mc.check_call(NAME, tp, tokens)
    return [({"T": mc.sampled_rows(tokens, phase), "V": int(model_cfg["vocab_size"])}, 1)]
