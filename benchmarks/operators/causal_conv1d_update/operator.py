"""Decode form of the depthwise causal conv1d (benchmarks/operators/causal_conv1d): one new token per
sequence against a rolling conv state, which the call updates in place: the reference, seeded inputs,
the work model and where models call it.

conv_state[b, d, :] holds sequence b's last W - 1 inputs of channel d, oldest first (vLLM's
causal_conv1d_update layout, state_len = W - 1). With window = [conv_state[b, d, 0..W-2], x[b, d]]:
out[b, d] = bias[d] + sum_{i < W} weight[d, i] * window[i] (then silu when `silu`), and conv_state[b, d, :]
becomes window[1..W-1] (shifted by one, the new token last). A sequence's prefill through causal_conv1d
followed by updates gives, token by token, the prefill op's outputs over the longer sequence.
Contract: benchmarks/operators/README.md and /tmp/issues/MULTIOUT.md (MUTATES).
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import not_pow2, outlier_activations, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "causal_conv1d_update"
SIGNATURE = ("causal_conv1d_update(x[B,D], conv_state[B,D,W-1], weight[D,W], bias[D], silu) -> [B,D] "
             "(mutates conv_state)")
ARGS = ("x", "conv_state", "weight", "bias", "silu")
MUTATES = ("conv_state",)
PHASES = ("decode",)             # prefill runs the whole-sequence form, causal_conv1d
DESCRIPTION = (
    "One decode step of the depthwise causal convolution over the q/k/v channels of Qwen3-Next's Gated "
    "DeltaNet layers (vLLM's causal_conv1d_update): each of B sequences brings one new token x[b, :] and "
    "keeps a conv state conv_state[b, d, 0..W-2], its last W - 1 inputs of channel d, oldest first. With "
    "window = (conv_state[b, d, 0], ..., conv_state[b, d, W-2], x[b, d]): out[b, d] = bias[d] + sum over "
    "i < W of weight[d, i] * window[i], followed by silu(v) = v / (1 + exp(-v)) when silu is True (as the "
    "model runs it) and nothing when False. The call also updates conv_state in place, for every b and d: "
    "conv_state[b, d, :] = window[1..W-1] (shifted left by one, x last); it must not write anything else "
    "(every other argument stays unchanged). x is [B, D] and conv_state [B, D, W-1], both contiguous, in "
    "bf16, fp16 or fp32; weight [D, W] and bias [D] share their dtype; W is 4. out is a new contiguous "
    "[B, D] tensor in x's dtype; the state keeps its dtype (the shifted values are copies, exact). "
    "Multiply and accumulate in fp32, round once on the store. D is 4096 per GPU for Qwen3-Next at TP2 "
    "(odd in hold-outs), B the decode batch (1-256). silu arrives as a Python bool: give it a scalar default "
    "(silu=True) so the lint knows it is not a tensor. Tiny and memory-bound: read each state row once."
)

# As causal_conv1d: one rounding of the output dtype from an fp32 sum of W + 1 terms (silu adds one more
# rounding-free fp32 step); rtol about two ulps. The state's new values are copies of inputs, so an honest
# kernel matches it exactly; an unshifted or misplaced state is off by O(1) and fails every bound.
# The output's element scale (reference_with_scale) is the summands' magnitude, |bias| + sum |w_i window_i|,
# for the reason causal_conv1d gives: fp32 rounding errs with the terms, not with a result they cancel to
# (outlier channels; an honest fp32 prefill kernel failed 1e-5 + 1e-5 * |ref| once in CI). silu's slope is
# at most 1.1, so the bound holds through it. fp32 inputs only, as there.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
}

OUTLIER_SHARE = 0.005            # channels that are outliers, in the token and in its history alike
OUTLIER_SCALE = (20.0, 100.0)
HOLDOUT_MAX_B = 1024
_INTERP = {"B": 4, "D": 256}


def _dims(dims) -> tuple[int, int, int]:
    B, D, W = (int(dims[n]) for n in ("B", "D", "W"))
    if min(B, D) < 1 or W < 2:
        raise ValueError(f"{NAME}: dims B={B}, D={D} must be >= 1 and W={W} >= 2 (a state of W - 1 >= 1 inputs)")
    return B, D, W


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    """x and the state ~ N(0, 1) with the same few outlier channels (the state holds earlier tokens of the
    same channels); weights ~ N(0, 1/W), a small bias (as causal_conv1d). silu alternates with the seed,
    True on even seeds (the model's setting), False on odd ones, so both forms are checked."""
    B, D, W = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    tokens = outlier_activations(B * W, D, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).reshape(B, W, D)
    x = tokens[:, -1, :].contiguous()
    conv_state = tokens[:, :-1, :].transpose(1, 2).contiguous()     # [B, D, W-1], oldest first
    weight = torch.randn(D, W, generator=gen, device=device, dtype=torch.float32) * W ** -0.5
    bias = 0.1 * torch.randn(D, generator=gen, device=device, dtype=torch.float32)
    return {"x": x.to(tdt), "conv_state": conv_state.to(tdt), "weight": weight.to(tdt), "bias": bias.to(tdt),
            "silu": int(seed) % 2 == 0}


def reference(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
              silu: bool) -> torch.Tensor:
    return reference_with_scale(x, conv_state, weight, bias, silu)[0]


def reference_with_scale(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                         silu: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(reference's output, scale), updating conv_state as reference does: with fp32 inputs scale[b, d] =
    |bias[d]| + sum_i |weight[d, i] * window[b, d, i]| in fp32, the magnitudes of the terms an honest kernel
    adds up; other dtypes None (the plain bound; causal_conv1d's TOLERANCES say why)."""
    window = torch.cat([conv_state, x[:, :, None]], dim=-1)          # [B, D, W]
    terms = window.double() * weight.double()
    y = terms.sum(-1) + bias.double()
    scale = (terms.abs().sum(-1) + bias.double().abs()).float() if x.dtype == torch.float32 else None
    if silu:
        y = torch.nn.functional.silu(y)
    conv_state.copy_(window[:, :, 1:])
    return y.to(x.dtype), scale


def baseline(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
             silu: bool) -> torch.Tensor:
    """What a user runs instead: HF transformers' torch fallback of the update, in the activation dtype:
    roll the state, write the token, multiply-sum with the weights."""
    window = torch.cat([conv_state, x[:, :, None]], dim=-1)
    conv_state.copy_(window[:, :, 1:])
    y = torch.sum(window * weight, dim=-1) + bias
    return torch.nn.functional.silu(y) if silu else y


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    B, D, _ = _dims(dims)
    torch_dtype(NAME, dtype)
    return (B, D), dtype


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: (2W + 1) FLOPs per output (W multiply-adds and the bias), on the fp32 peak; silu's few FLOPs
    left out. Q: x read (B*D), the state read and written whole (2*B*D*(W-1): every entry changes), weight
    and bias once (D*W + D), out written (B*D)."""
    B, D, W = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": float((2 * W + 1) * B * D)}, float((2 * B * D + 2 * B * D * (W - 1) + D * W + D) * b)


def interpreter_dims(dims) -> dict[str, int]:
    B, D, W = _dims(dims)
    return {"B": scale_down(B, _INTERP["B"], 3), "D": scale_down(D, _INTERP["D"], 192 + D % 64), "W": W}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes: one sequence with odd channels, a batch that is not a power of two, a batch
    larger than every hot one, and a small odd batch at a hot width."""
    hot_D = sorted({int(d["D"]) for d in hot_dims}) or [4096]
    hot_B = sorted({int(d["B"]) for d in hot_dims}) or [256]
    W = int(hot_dims[0]["W"]) if hot_dims else 4
    big_B = not_pow2(min(HOLDOUT_MAX_B, hot_B[-1] + rng.randrange(1, hot_B[-1] // 2 + 2)))
    return [
        {"B": 1, "D": (rng.choice(hot_D) - 2 * rng.randrange(1, 64)) | 1, "W": W},
        {"B": not_pow2(rng.randrange(17, 200)), "D": rng.choice(hot_D), "W": W},
        {"B": big_B, "D": rng.choice(hot_D), "W": W},
        {"B": rng.choice([3, 5, 7]), "D": rng.choice(hot_D) + 2 * rng.randrange(1, 32) + 1, "W": W},
    ]


def occurrences(model_cfg: dict, tp: int, tokens: int, phase: str = "decode") -> list[tuple[dict[str, int], int]]:
    """One call per Gated DeltaNet layer of a decode step (Qwen3-Next-80B-A3B in the serving mix), each
    of the `tokens` sequences bringing one token: B = tokens, D = the q/k/v conv channels per GPU,
    (2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads * linear_value_head_dim) / tp,
    W = linear_conv_kernel_dim. Prefill: none (causal_conv1d)."""
    mc.check_call(NAME, tp, tokens)
    layers = mc.linear_attention_layers(model_cfg)
    if not layers or phase != "decode":
        return []
    conv = mc.short_conv_channels(model_cfg)
    dims = {"B": int(tokens), "D": mc.per_gpu(NAME, conv, tp, "q/k/v conv channels"),
            "W": int(model_cfg["linear_conv_kernel_dim"])}
    return [(dims, layers)]
