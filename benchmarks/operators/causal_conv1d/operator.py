"""Depthwise causal 1-D convolution over a prefill sequence (the short conv of Gated DeltaNet and Mamba
layers): the reference, seeded inputs, the work model and where models call it.

out[b, d, l] = bias[d] + sum_{i < W} weight[d, i] * x[b, d, l - W + 1 + i], with x = 0 before the sequence
starts; fp32 accumulation, stored in x's dtype. The decode form (one new token against a rolling conv
state, updated in place) is the operator causal_conv1d_update (benchmarks/operators/causal_conv1d_update).
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import not_pow2, outlier_activations, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "causal_conv1d"
SIGNATURE = "causal_conv1d(x[B,D,L], weight[D,W], bias[D]) -> [B,D,L]"
ARGS = ("x", "weight", "bias")
PHASES = ("prefill",)            # decode runs the one-token update form, causal_conv1d_update
DESCRIPTION = (
    "Depthwise causal convolution along the sequence, as the short convolution over the q/k/v channels of "
    "Qwen3-Next's Gated DeltaNet layers (and Mamba2's): out[b, d, l] = bias[d] + sum over i < W of "
    "weight[d, i] * x[b, d, l - W + 1 + i], where positions before 0 read as zero (each sequence starts "
    "with an empty state), no activation. x is [B, D, L] contiguous (channels, then positions) in bf16, "
    "fp16 or fp32; weight [D, W] and bias [D] share its dtype; W is 4. The output is a new contiguous "
    "[B, D, L] tensor in x's dtype. Multiply and accumulate in fp32, round once on the store. Each output "
    "reads W neighbouring inputs of its channel: read x once and reuse the overlap in registers or cache. "
    "D is 4096 per GPU for Qwen3-Next at TP2 (odd in hold-outs), L is a prefill length (1024-2048, odd "
    "and longer in hold-outs), B the sequences of a chunk. The decode step (one token against a conv state) "
    "is another operator, causal_conv1d_update."
)

# One rounding of the output dtype from an fp32 sum of W + 1 terms; rtol about two ulps. A kernel that
# drops the zero padding (wraps around, or reads the previous sequence) changes the first W - 1 outputs
# of each row by O(1), which the elementwise bound catches.
# Why a scale (reference_with_scale): the fp32 sum's own rounding errs in proportion to its terms, not to
# the result they cancel to. In outlier channels (x at 20-100x) terms of ~100 cancelled to 0.0032 and an
# honest fp32 kernel, adding them in another order than the reference, was off by 1.1e-5 there, over
# 1e-5 + 1e-5 * |ref| (CI, 2026-12-06; on CPU about 1 input draw in 400 at the interpreter's shape). Its
# error over the summands' magnitude was at most 2.3e-7 in 400 draws, 45x inside rtol. A dropped,
# doubled or misplaced tap moves an element by a whole term, over rtol of the summands' total wherever
# that term is not tiny (tests/benchmarks/test_op_causal_conv1d.py). fp32 inputs only: in bf16 and fp16 the
# fp32 sum's error (~3e-7 of magnitudes up to ~2000: 6e-4) is inside atol (2e-3, 2e-2), and the scale would let a
# kernel that accumulates in the activation dtype through (its error ~2^-8 of the magnitudes, inside
# 2e-2 of them), which the contract forbids and the plain bound catches where terms cancel.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

OUTLIER_SHARE = 0.005            # channels (rows of x) that are outliers
OUTLIER_SCALE = (20.0, 100.0)
HOLDOUT_MAX_L = 16384
_INTERP = {"B": 2, "D": 8, "L": 256}


def _dims(dims) -> tuple[int, int, int, int]:
    B, D, L, W = (int(dims[n]) for n in ("B", "D", "L", "W"))
    if min(B, D, L, W) < 1:
        raise ValueError(f"{NAME}: dims B={B}, D={D}, L={L}, W={W} must all be >= 1")
    return B, D, L, W


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    """x ~ N(0, 1) with a few outlier channels; conv weights ~ N(0, 1/W) (trained short convs' scale) and a
    small bias, so outputs are O(1) and never zero."""
    B, D, L, W = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    # outliers are whole channels: rows of x over every position, as real activations' channels are
    x = outlier_activations(B * L, D, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).reshape(B, L, D)
    x = x.transpose(1, 2).contiguous()
    weight = torch.randn(D, W, generator=gen, device=device, dtype=torch.float32) * W ** -0.5
    bias = 0.1 * torch.randn(D, generator=gen, device=device, dtype=torch.float32)
    return {"x": x.to(tdt), "weight": weight.to(tdt), "bias": bias.to(tdt)}


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    D, W = weight.shape
    L = x.shape[-1]
    y = torch.nn.functional.conv1d(x.double(), weight.double()[:, None, :], bias.double(), padding=W - 1, groups=D)
    return y[..., :L].to(x.dtype)


def reference_with_scale(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor,
                                                                                              torch.Tensor | None]:
    """(reference's output, scale): with fp32 inputs scale[b, d, l] = |bias[d]| + sum_i |weight[d, i] *
    x[b, d, l - W + 1 + i]| in fp32, the magnitudes of the terms an honest kernel adds up there, and the gate
    bounds each element by atol + rtol * max(|ref|, scale) (see TOLERANCES): one more conv, of the
    magnitudes. Other dtypes: None, the plain bound."""
    if x.dtype != torch.float32:
        return reference(x, weight, bias), None
    D, W = weight.shape
    L = x.shape[-1]
    scale = torch.nn.functional.conv1d(x.double().abs(), weight.double().abs()[:, None, :], bias.double().abs(),
                                       padding=W - 1, groups=D)
    return reference(x, weight, bias), scale[..., :L].float()


def baseline(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """What a user runs instead: HF transformers' fallback without the causal-conv1d package, a grouped
    conv1d in the activation dtype with W - 1 padding, truncated to L."""
    D, W = weight.shape
    return torch.nn.functional.conv1d(x, weight[:, None, :], bias, padding=W - 1, groups=D)[..., :x.shape[-1]]


def output_spec(dims, dtype: str) -> tuple[tuple[int, int, int], str]:
    B, D, L, _ = _dims(dims)
    torch_dtype(NAME, dtype)
    return (B, D, L), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 2 FLOPs per tap and output (multiply, add) plus the bias add: (2W + 1) per output, fp32 peak.
    Q: x read once and out written once (B*D*L elements each), weight and bias once (D*W + D)."""
    B, D, L, W = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": float((2 * W + 1) * B * D * L)}, float((2 * B * D * L + D * W + D) * b)


def interpreter_dims(dims) -> dict[str, int]:
    B, D, L, W = _dims(dims)
    return {"B": min(B, _INTERP["B"]), "D": scale_down(D, _INTERP["D"], 5),
            "L": scale_down(L, _INTERP["L"], 192 + L % 64), "W": W}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes: a length shorter than W (all padding), odd channels and an odd length, several
    sequences, and a length longer than every hot one."""
    hot_D = sorted({int(d["D"]) for d in hot_dims}) or [4096]
    hot_L = sorted({int(d["L"]) for d in hot_dims}) or [2048]
    hot_B = sorted({int(d["B"]) for d in hot_dims}) or [1]
    W = int(hot_dims[0]["W"]) if hot_dims else 4
    return [
        {"B": rng.choice([1, 3]), "D": rng.choice(hot_D), "L": rng.randrange(1, W), "W": W},
        {"B": 1, "D": (rng.choice(hot_D) - 2 * rng.randrange(1, 64)) | 1, "L": not_pow2(rng.randrange(65, 1024)) | 1,
         "W": W},
        {"B": hot_B[-1] + rng.randrange(1, 4), "D": rng.choice(hot_D), "L": not_pow2(rng.randrange(200, 2048)),
         "W": W},
        {"B": 1, "D": rng.choice(hot_D), "L": not_pow2(min(HOLDOUT_MAX_L, hot_L[-1] + rng.randrange(1, hot_L[-1]))),
         "W": W},
    ]


def occurrences(model_cfg: dict, tp: int, tokens: int, phase: str = "prefill") -> list[tuple[dict[str, int], int]]:
    """One call per Gated DeltaNet layer of a prefill pass over the conv channels of q, k and v:
    D = (2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads * linear_value_head_dim) / tp,
    W = linear_conv_kernel_dim. A prefill chunk of `tokens` holds B = max(1, tokens / 2048) sequences of
    L = tokens / B (model_calls.PREFILL_TOKENS_PER_SEQUENCE). Decode: none (causal_conv1d_update)."""
    mc.check_call(NAME, tp, tokens)
    layers = mc.linear_attention_layers(model_cfg)
    if not layers or phase != "prefill":
        return []
    conv = mc.short_conv_channels(model_cfg)
    B = mc.sampled_rows(tokens, "prefill")
    dims = {"B": B, "D": mc.per_gpu(NAME, conv, tp, "q/k/v conv channels"), "L": int(tokens) // B,
            "W": int(model_cfg["linear_conv_kernel_dim"])}
    return [(dims, layers)]
