"""The router of a softmax-gated mixture of experts (vLLM's topk_softmax): softmax over the experts, the k
largest, renormalized. The reference, seeded router logits with ties, the work model and where models call it.

Per token: p = softmax(logits[t, :]) in fp32; ids = the k experts of largest p, largest first, equal p
ordered by the lower expert id; weights = p[ids], divided by their sum when renormalize.
Contract: benchmarks/operators/README.md; several outputs (an exact int32 one): OUTPUTS below.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import not_pow2, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "moe_topk_softmax"
SIGNATURE = "moe_topk_softmax(logits[T,E], k=8, renormalize=True) -> (weights[T,k] fp32, ids[T,k] int32)"
ARGS = ("logits", "k", "renormalize")
OUTPUTS = ("weights", "ids")
DESCRIPTION = (
    "The routing step of a softmax-gated MoE layer, per token t of router logits [T, E] (E experts, "
    "bf16, fp16 or fp32): p = softmax(logits[t, :]) computed in fp32; ids[t, :] = the k experts with the "
    "largest p in decreasing order of p, where experts with equal p (equal logits: bf16 router logits tie "
    "often) come in increasing expert id, so the lower id wins a tie at the k-th place too; weights[t, j] = "
    "p[ids[t, j]], divided by the sum of the k selected p when renormalize is True (Qwen3-MoE's "
    "norm_topk_prob, Mixtral, gpt-oss; the benchmark always passes True). k (an int, 2-10 in the benchmark, "
    "k <= E) and renormalize are Python values (declare k with a default, k=8, as the signature does: the "
    "sandbox's lint counts a parameter without a scalar default as a tensor). Returns (weights, ids): "
    "weights a new contiguous [T, k] fp32 tensor, ids a new contiguous [T, k] int32 tensor. ids are "
    "compared exactly, weights within fp32 rounding. Logits are multiples of 1/16 (so distinct logits differ by at least 1/16 and their "
    "probabilities by 6%: no fp32 summation order can reorder them); many rows hold exact ties, some at "
    "the k-th place. E is 8-512 (not always a power of two in hold-outs); T is 1-256 in decode and "
    "thousands in prefill."
)

# weights: fp32 softmax over up to ~1000 logits, then a division: a few ulps from exp and the sum's order,
# rtol 1e-5 (~80 ulps); atol for the smallest selected weights. The ids output is int32, compared exactly.
# A wrong tie order swaps ids (exact mismatch); skipping the renormalization leaves weights 10-60% low.
_WEIGHTS = Tolerance(atol=1e-6, rtol=1e-5, rel_l2=1e-5)
TOLERANCES = {"bf16": _WEIGHTS, "fp16": _WEIGHTS, "fp32": _WEIGHTS}

LOGIT_GRID = 16.0                # logits are multiples of 1/16, exact in bf16 and fp16 for |x| < 16
LOGIT_STD = 1.5                  # per token: N(0, 1.5^2) around per-expert popularity
POPULARITY_STD = 1.0             # experts differ in how often they are chosen (a fixed bias per expert)
LOGIT_LIMIT = 15.0
TIE_EVERY = 3                    # every third row: its k-th and (k+1)-th logits made equal (a tie at the cut)
HOLDOUT_MAX_T = 1 << 15
HOLDOUT_ODD_E = (60, 72, 160)    # Qwen1.5-MoE's 60 experts, and other counts that are not powers of two
_INTERP_MAX_T = 16


def _dims(dims) -> tuple[int, int, int]:
    T, E, k = int(dims["T"]), int(dims["E"]), int(dims["k"])
    if min(T, E, k) < 1 or k > E:
        raise ValueError(f"{NAME}: dims T={T}, E={E}, k={k} must be >= 1 with k <= E")
    return T, E, k


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    """Logits: a per-expert popularity plus per-token noise, snapped to the 1/16 grid (ties happen on their
    own, as in bf16); every TIE_EVERY-th row (at least one per call) also gets its (k+1)-th largest logit set equal to its k-th."""
    T, E, k = _dims(dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    popularity = POPULARITY_STD * torch.randn(E, generator=gen, device=device, dtype=torch.float32)
    x = popularity[None, :] + LOGIT_STD * torch.randn(T, E, generator=gen, device=device, dtype=torch.float32)
    x = (x * LOGIT_GRID).round().clamp(-LOGIT_LIMIT * LOGIT_GRID, LOGIT_LIMIT * LOGIT_GRID) / LOGIT_GRID
    if k < E:
        order = x.sort(dim=-1, descending=True, stable=True).indices
        # the first tie row at random among the first min(T, TIE_EVERY): every call has one, also at T=1 or 2
        offset = int(torch.randint(0, TIE_EVERY, (1,), generator=gen, device=device)) % min(T, TIE_EVERY)
        rows = torch.arange(T, device=device)[offset::TIE_EVERY]
        x[rows, order[rows, k]] = x[rows, order[rows, k - 1]]
    return {"logits": x.to(torch_dtype(NAME, dtype)).contiguous(), "k": k, "renormalize": True}


def reference(logits, k: int, renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Order by logit (softmax is monotonic; equal logits give equal p) with a stable sort, so equal values keep
    increasing expert id; probabilities in float64."""
    x = logits.double()
    p = torch.softmax(x, dim=-1)
    ids = x.sort(dim=-1, descending=True, stable=True).indices[:, :k]
    w = p.gather(1, ids)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w.float().contiguous(), ids.to(torch.int32).contiguous()


def baseline(logits, k: int, renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user runs instead: HF's MoE router (fp32 softmax, top-k, renormalize), with a stable sort in
    place of torch.topk, whose order among equal values is unspecified (it would break the tie rule)."""
    p = torch.softmax(logits, dim=-1, dtype=torch.float32)
    w, ids = p.sort(dim=-1, descending=True, stable=True)
    w, ids = w[:, :k], ids[:, :k]
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w.contiguous(), ids.to(torch.int32).contiguous()


def output_spec(dims, dtype: str) -> tuple[tuple[tuple[int, int], str], tuple[tuple[int, int], str]]:
    T, _, k = _dims(dims)
    torch_dtype(NAME, dtype)
    return ((T, k), "fp32"), ((T, k), "int32")


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 4 FLOPs per logit for the softmax (max, subtract, exp, sum) and one compare for the selection, fp32
    peak. Q: the logits read once, weights (fp32) and ids (int32) written once."""
    T, E, k = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 5.0 * T * E}, float(T * E * b + 8 * T * k)


def interpreter_dims(dims) -> dict[str, int]:
    T, E, k = _dims(dims)
    return {"T": scale_down(T, _INTERP_MAX_T, 13), "E": E, "k": k}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """A few tokens over an expert count that is not a power of two with an odd k; a token count that is not
    a power of two at a hot (E, k); more tokens than any hot shape; more experts than any hot shape."""
    hot = [_dims(d) for d in hot_dims] or [(64, 128, 8)]
    max_t, max_e = max(h[0] for h in hot), max(h[1] for h in hot)
    _, e, k = rng.choice(hot)
    _, e2, k2 = rng.choice(hot)
    big_t = not_pow2(min(max_t + rng.randrange(1, max_t // 2 + 2), HOLDOUT_MAX_T))
    return [
        {"T": rng.choice([3, 5, 7]), "E": rng.choice(HOLDOUT_ODD_E), "k": rng.choice([3, 5, 6])},
        {"T": not_pow2(rng.randrange(17, 2048)), "E": e, "k": k},
        {"T": big_t, "E": e2, "k": k2},
        {"T": rng.choice([1, 2, 5]), "E": max_e + 2 * rng.randrange(1, 128) + 1, "k": rng.choice([4, 8, 9])},
    ]


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """One router call per MoE layer, over every token and all experts (the router is replicated on every
    GPU: tp does not change the shape): Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Next (E=512, k=10), Mixtral
    (E=8, k=2) and gpt-oss (E=128, k=4; top-k of the logits, then softmax over those k, which is this
    operator with renormalize). DeepSeek-V3 is left out: its router scores with a sigmoid and picks experts
    by group with a bias (scoring_func: sigmoid), another kernel."""
    mc.check_call(NAME, tp, tokens)
    layers = mc.moe_layers(model_cfg)
    if not layers or model_cfg.get("scoring_func", "softmax") != "softmax":
        return []
    dims = {"T": int(tokens), "E": mc.num_experts(model_cfg), "k": int(model_cfg["num_experts_per_tok"])}
    return [(dims, layers)]
