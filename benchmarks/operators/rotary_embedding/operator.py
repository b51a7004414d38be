"""Rotary position embedding of q and k (GPT-NeoX rotate-half style, and GPT-J interleaved on request): the
reference, seeded inputs, the work model and where models call it.

Per token t and head, with c = cos_sin_cache[positions[t], :D/2], s = cos_sin_cache[positions[t], D/2:]:
neox: (x1, x2) = (x[:D/2], x[D/2:]) -> (x1*c - x2*s, x2*c + x1*s); interleaved: the same on (x[0::2], x[1::2]).
Contract: benchmarks/operators/README.md; several outputs: OUTPUTS below.
"""
from __future__ import annotations

import math

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import heads_holdout_dims, heads_interpreter_dims, outlier_activations, torch_dtype
from benchmarks.spec import Tolerance

NAME = "rotary_embedding"
SIGNATURE = ("rotary_embedding(q[T,Hq*D], k[T,Hk*D], positions[T] int64, cos_sin_cache[P,D] fp32, neox=True)"
             " -> (q_out[T,Hq*D], k_out[T,Hk*D])")
ARGS = ("q", "k", "positions", "cos_sin_cache", "neox")
OUTPUTS = ("q_out", "k_out")
DESCRIPTION = (
    "Rotary position embedding of the query and key heads of one attention layer, as a serving engine "
    "applies it after the QKV projection. q is [T, Hq*D] and k is [T, Hk*D] (T tokens; Hq query and Hk "
    "key heads of D channels each, head h in columns h*D .. h*D+D-1), bf16, fp16 or fp32, contiguous. "
    "positions is [T] int64: the position of each token in its own sequence (a batch mixes sequences, so "
    "positions[t] is not t: decode tokens sit at scattered positions, a prefill chunk holds runs of "
    "consecutive positions that start anywhere). cos_sin_cache is [P, D] fp32: row p holds cos(p*f_i) "
    "in columns i < D/2 and sin(p*f_i) in columns D/2 + i (f_i the model's frequencies, possibly scaled: "
    "read them from the cache, never recompute them). With c_i, s_i from row positions[t], each head "
    "of q and of k is rotated pairwise, out_a = x_a*c_i - x_b*s_i, out_b = x_b*c_i + x_a*s_i, where for "
    "neox=True (GPT-NeoX rotate-half, as Llama, Qwen, Mixtral and gpt-oss use; the benchmark's shapes) "
    "a = i, b = i + D/2, and for neox=False (GPT-J interleaved) a = 2i, b = 2i+1. Returns (q_out, k_out): "
    "two new contiguous tensors of q's and k's shapes and dtype; the inputs stay unchanged. Compute in "
    "fp32 and round once on the store. q and k carry a few outlier channels 10-50x larger. D is 64 or 128 "
    "in the benchmark (even, not always a power of two in hold-outs); Hq and Hk are per-GPU head counts "
    "(Hk can be 1); T is 1-256 in decode and thousands in prefill."
)

# One rounding of the output dtype from an fp32 result; rtol about two ulps (bf16 2^-8, fp16 2^-11). fp32:
# a product of an outlier (up to ~70 after the cache's scale) and a sine carries ~70 * 2^-24 of rounding,
# so atol allows a few of those where the two products cancel. Using t for positions[t], the other half's
# sign or the interleaved pairing changes outputs by O(1) and fails every bound.
TOLERANCES = {
    "bf16": Tolerance(atol=2e-2, rtol=2e-2, rel_l2=1e-2),
    "fp16": Tolerance(atol=2e-3, rtol=2e-3, rel_l2=2e-3),
    "fp32": Tolerance(atol=5e-5, rtol=1e-5, rel_l2=1e-5),
}

OUTLIER_SHARE = 0.01
OUTLIER_SCALE = (10.0, 50.0)
MAX_POSITION = 16384           # cache rows: a 16k context; decode positions are drawn from all of them
DECODE_MAX_T = 256             # up to this many tokens: one token per sequence (decode)
PREFILL_SEQUENCE = 1024        # beyond: runs of about this many consecutive positions (chunked prefill)
# rope_theta of Llama-2, gpt-oss, Llama-3 and Qwen3; YaRN scales cos and sin by an attention factor
# (0.1 ln(32) + 1 for gpt-oss's factor 32). Drawn per seed, so the cache is data, not a known formula.
ROPE_THETAS = (1.0e4, 1.5e5, 5.0e5, 1.0e6)
CACHE_SCALES = (1.0, 1.0 + 0.1 * math.log(32.0))
HOLDOUT_MAX_T = 1 << 16
HOLDOUT_HEAD_DIMS = (80, 96)   # even, not powers of two (Phi-2, Phi-3 heads)


def _dims(dims) -> tuple[int, int, int, int]:
    T, Hq, Hk, D = (int(dims[k]) for k in ("T", "Hq", "Hk", "D"))
    if min(T, Hq, Hk, D) < 1 or D % 2:
        raise ValueError(f"{NAME}: dims T={T}, Hq={Hq}, Hk={Hk}, D={D} must be >= 1 with D even "
                         f"(channels rotate in pairs)")
    return T, Hq, Hk, D


def cos_sin_cache(D: int, rows: int, theta: float, scale: float, device="cpu") -> torch.Tensor:
    """[rows, D] fp32: scale * cos(p * f_i) in columns i < D/2, scale * sin(p * f_i) after, f_i = theta^(-2i/D)
    (vLLM's layout), computed in float64."""
    inv_freq = theta ** (-torch.arange(0, D, 2, dtype=torch.float64, device=device) / D)
    angles = torch.arange(rows, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    return (scale * torch.cat([angles.cos(), angles.sin()], dim=1)).float().contiguous()


def _positions(T: int, rows: int, gen: torch.Generator, device) -> torch.Tensor:
    """Decode: one token per sequence at a random position. Prefill: runs of consecutive positions (one per
    sequence of the chunk) of random lengths, each starting at a random position."""
    if T <= DECODE_MAX_T:
        return torch.randint(0, rows, (T,), generator=gen, device=device)
    n_seq = max(2, T // PREFILL_SEQUENCE)
    cuts = (torch.randperm(T - 1, generator=gen, device=device)[:n_seq - 1] + 1).sort().values
    begins = torch.cat([torch.zeros(1, dtype=torch.long, device=device), cuts])
    lengths = torch.diff(torch.cat([begins, torch.full((1,), T, device=device)]))
    starts = (torch.rand(n_seq, generator=gen, device=device, dtype=torch.float32) * (rows - lengths + 1).double()).long()
    t = torch.arange(T, device=device)
    seq = torch.searchsorted(cuts, t, right=True)
    return starts[seq] + (t - begins[seq])


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, Hq, Hk, D = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    q = outlier_activations(T, Hq * D, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(tdt)
    k = outlier_activations(T, Hk * D, gen, device, OUTLIER_SHARE, OUTLIER_SCALE).to(tdt)
    rows = max(MAX_POSITION, T)
    pick = torch.randint(0, len(ROPE_THETAS) * len(CACHE_SCALES), (1,), generator=gen, device=device)
    theta, scale = ROPE_THETAS[int(pick) % len(ROPE_THETAS)], CACHE_SCALES[int(pick) // len(ROPE_THETAS)]
    return {"q": q, "k": k, "positions": _positions(T, rows, gen, device),
            "cos_sin_cache": cos_sin_cache(D, rows, theta, scale, device), "neox": True}


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, neox: bool) -> torch.Tensor:
    T, D = x.shape[0], 2 * cos.shape[-1]
    h = x.double().reshape(T, -1, D)
    x1, x2 = (h[..., :D // 2], h[..., D // 2:]) if neox else (h[..., 0::2], h[..., 1::2])
    o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    out = torch.cat([o1, o2], dim=-1) if neox else torch.stack([o1, o2], dim=-1).flatten(-2)
    return out.reshape(T, -1).to(x.dtype)


def reference(q, k, positions, cos_sin_cache, neox: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    half = cos_sin_cache.shape[1] // 2
    rows = cos_sin_cache.double()[positions.long()]
    cos, sin = rows[:, None, :half], rows[:, None, half:]
    return _rotate(q, cos, sin, neox), _rotate(k, cos, sin, neox)


def baseline(q, k, positions, cos_sin_cache, neox: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user runs instead: vLLM's PyTorch-native RotaryEmbedding.forward (index the cache, chunk it,
    rotate each head), with the math in fp32 as the cache is."""
    cos, sin = cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]

    def rotate(x):
        T, D = x.shape[0], cos_sin_cache.shape[1]
        h = x.view(T, -1, D).float()
        if neox:
            a, b = h.chunk(2, dim=-1)
            out = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        else:
            a, b = h[..., 0::2], h[..., 1::2]
            out = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
        return out.to(x.dtype).view(T, -1)
    return rotate(q), rotate(k)


def baseline_liger_inputs(q, k, positions, cos_sin_cache, neox: bool = True) -> dict:
    """Liger rotates HF's [batch, heads, seq, D] views in place: copies of q and k in that form (so the
    operator's inputs stay unchanged), and the cache rows of the batch's positions (HF's rotary module
    computes them once per forward pass, outside the layers)."""
    if not neox:
        raise ValueError("Liger-Kernel's RoPE is the neox (rotate-half) form only; neox=False has no Liger baseline")
    T, D = q.shape[0], cos_sin_cache.shape[1]
    rows = cos_sin_cache.index_select(0, positions)
    return {"q": q.clone().view(1, T, -1, D).transpose(1, 2), "k": k.clone().view(1, T, -1, D).transpose(1, 2),
            "cos": rows[None, :, :D // 2].contiguous(), "sin": rows[None, :, D // 2:].contiguous()}


def baseline_liger(q, k, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
    """Liger-Kernel 0.8.5's LigerRopeFunction (its fp32 half-width cos/sin with rotary_dim = D), back in
    the operator's [T, H*D] layout (views, no copy)."""
    from liger_kernel.ops.rope import LigerRopeFunction
    qo, ko = LigerRopeFunction.apply(q, k, cos, sin, None, 1, 2 * cos.shape[-1])
    T = qo.shape[2]
    return qo.transpose(1, 2).reshape(T, -1), ko.transpose(1, 2).reshape(T, -1)


def output_spec(dims, dtype: str) -> tuple[tuple[tuple[int, int], str], tuple[tuple[int, int], str]]:
    T, Hq, Hk, D = _dims(dims)
    torch_dtype(NAME, dtype)
    return ((T, Hq * D), dtype), ((T, Hk * D), dtype)


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 6 FLOPs per rotated pair (4 multiplies, 2 adds), 3 per channel of q and k, on the fp32 peak. Q: q
    and k read once and written once, positions once (8 bytes a token), one fp32 cache row of D per token
    (distinct positions in decode; a prefill run reads distinct rows too)."""
    T, Hq, Hk, D = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 3.0 * T * (Hq + Hk) * D}, float(2 * T * (Hq + Hk) * D * b + 8 * T + 4 * T * D)


def interpreter_dims(dims) -> dict[str, int]:
    _dims(dims)
    return heads_interpreter_dims(dims)


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return heads_holdout_dims(rng, hot_dims, HOLDOUT_HEAD_DIMS, HOLDOUT_MAX_T)


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """One call per attention layer on its per-GPU heads (query heads split over TP, KV heads split and
    replicated beyond, model_calls.attention_heads), every token, D = head_dim: Llama-3.1 8B/70B, Qwen3
    30B/235B, Mixtral and gpt-oss (YaRN changes only the cache). Left out, each for its own form: Command-R7B
    and DeepSeek-V3 (rope_interleaved: GPT-J pairs; DeepSeek's MLA also rotates only its 64-wide rope part of
    each query head and one shared key head), and Qwen3-Next (partial_rotary_factor 0.25: 64 of 256
    channels rotate, which needs a head size beside the cache's width)."""
    mc.check_call(NAME, tp, tokens)
    if model_cfg.get("rope_interleaved") or float(model_cfg.get("partial_rotary_factor", 1.0)) != 1.0:
        return []
    hq, hk = mc.attention_heads(NAME, model_cfg, tp)
    dims = {"T": int(tokens), "Hq": hq, "Hk": hk, "D": int(model_cfg["head_dim"])}
    return [(dims, mc.full_attention_layers(model_cfg))]
