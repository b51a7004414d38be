"""Routing alignment before a fused MoE GEMM: the (token, slot) pairs grouped by expert, each expert's group
padded to a multiple of the GEMM's row block, and one expert per block: the reference, seeded router-like
ids, the invariants a valid layout keeps (check), the work model and where models call it.

Valid layouts are not unique (the order inside an expert's group is free), so correctness is `check`, not
an elementwise comparison with the reference (contract: /tmp/issues/MULTIOUT.md, benchmarks/operators/README.md).
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import is_pow2, not_pow2, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "moe_align_block_size"
SIGNATURE = ("moe_align_block_size(topk_ids[T,k] int32, E, block) -> (sorted_ids[max_blocks*block] int32, "
             "expert_ids[max_blocks] int32, n_post_pad[1] int32)")
ARGS = ("topk_ids", "E", "block")
OUTPUTS = ("sorted_ids", "expert_ids", "n_post_pad")
DESCRIPTION = (
    "The routing alignment a fused mixture-of-experts GEMM consumes (vLLM's moe_align_block_size layout). "
    "topk_ids is [T, k] int32 (row-major strides or any others), k distinct experts in [0, E) per token; "
    "pair p = t * k + j names token t's j-th choice; E (int) is the number of experts, block (int, a power "
    "of two, 16-128) the GEMM's rows per block. Return three new contiguous int32 tensors: sorted_ids of "
    "max_blocks * block entries, expert_ids of max_blocks entries and n_post_pad of one entry, where "
    "max_blocks = cdiv(T*k + min(E, T*k) * (block - 1), block) (the padded total can never exceed it: only "
    "experts that get a pair are padded, each by fewer than block rows). c_e = number of pairs routed to "
    "expert e. n_post_pad[0] = sum over e of ceil(c_e / block) * block. sorted_ids[:n_post_pad] holds every "
    "pair index exactly once plus padding entries equal to the sentinel T*k; it is cut into blocks of "
    "`block` entries, expert_ids[b] is the expert of block b, every pair in block b is routed to "
    "expert_ids[b], and expert_ids[:n_post_pad / block] is non-decreasing (experts' groups in ascending "
    "expert order; an expert with no pair gets no block). The order of pairs and sentinels inside an "
    "expert's blocks is free (atomics are fine); entries past n_post_pad (in both tensors) are never read "
    "and may hold anything. E and block arrive as Python ints: give them scalar defaults in the signature "
    "(def moe_align_block_size(topk_ids, E=128, block=16)) so the lint knows they are sizes, not tensors. "
    "No host synchronization, fixed-size outputs: the call must be CUDA-graph "
    "capturable. T is 1-256 in decode and up to 16384 in prefill; (E, k) are (128, 8) for Qwen3, (256, 8) "
    "DeepSeek-V3, (8, 2) Mixtral, (128, 4) gpt-oss, (512, 10) Qwen3-Next; hold-outs use odd T and E that "
    "are not powers of two. Memory-bound and tiny (a few hundred KB): one launch per call where it fits."
)

# Every output is int32 and judged by check() (exact invariants); these bounds are never used, they exist
# because every operator names tolerances per dtype.
_EXACT = Tolerance(atol=0.0, rtol=0.0, rel_l2=1e-12)
TOLERANCES = {"bf16": _EXACT, "fp16": _EXACT, "fp32": _EXACT}

# The fused_moe seed's row block (BLOCK_M) by rows per expert, m = T*k/E: the first bucket whose bound is
# >= m. Copied from benchmarks/operators/fused_moe/seed.py CONFIGS (tests/benchmarks/test_op_moe_align_
# block_size.py checks they agree on every hot shape), so the benchmarked alignment is the one that GEMM runs.
BLOCK_BY_ROWS_PER_EXPERT = ((2, 16), (6, 16), (12, 32), (24, 32), (48, 64), (160, 128))
LARGEST_BLOCK = 128
HOLDOUT_MAX_T = 16384
HOLDOUT_ODD_E = (60, 72, 160, 384)      # Qwen1.5-MoE 60, Kimi-K2 384; the others not powers of two
_INTERP_MAX = {"T": 16, "E": 16, "block": 32}
# Used by holdout_dims before shapes.yaml exists: Qwen3-30B-A3B decode and prefill.
_FALLBACK_HOT = ({"T": 64, "k": 8, "E": 128, "block": 16}, {"T": 4096, "k": 8, "E": 128, "block": 128})


def block_size(T: int, k: int, E: int) -> int:
    m = T * k / E
    return next((b for bound, b in BLOCK_BY_ROWS_PER_EXPERT if m <= bound), LARGEST_BLOCK)


def _dims(dims) -> tuple[int, int, int, int]:
    T, k, E, block = (int(dims[n]) for n in ("T", "k", "E", "block"))
    if min(T, k, E, block) < 1:
        raise ValueError(f"{NAME}: dims T={T}, k={k}, E={E}, block={block} must all be >= 1")
    if k > E:
        raise ValueError(f"{NAME}: k={k} experts per token exceeds E={E}; the router picks k distinct experts")
    return T, k, E, block


def max_blocks(T: int, k: int, E: int, block: int) -> int:
    """Blocks the outputs are sized for: every pair plus fewer than `block` padding rows for each expert
    that gets a pair (at most min(E, T*k) of them)."""
    P = T * k
    return -(-(P + min(E, P) * (block - 1)) // block)


def expert_counts(topk_ids: torch.Tensor, E: int) -> torch.Tensor:
    """c_e, the pairs routed to each expert (int64 [E]; scatter_add, which needs no host sync)."""
    ids = topk_ids.reshape(-1).long()
    return torch.zeros(E, dtype=torch.long, device=ids.device).scatter_add_(0, ids, torch.ones_like(ids))


def _pair(p: int, k: int, ids: torch.Tensor) -> str:
    return f"pair {p} (token {p // k}, slot {p % k}, expert {int(ids[p])})"


def check_layout(topk_ids, E: int, block: int, sorted_ids, expert_ids, n_post_pad) -> str | None:
    """The invariants of a valid layout, in an order that names a cheat by its own rule: the padded total,
    each pair at most once (a pair twice, padding with a real index), the index range (before "missing",
    so an unwritten slot is named as such), each pair at least once, one expert per block (a block shared
    by two experts), ascending experts."""
    T, k = topk_ids.shape
    P = T * k
    ids = topk_ids.reshape(-1).long()
    want = int(((expert_counts(topk_ids, E) + block - 1) // block * block).sum())
    n = int(n_post_pad.reshape(-1)[0])
    if n != want:
        return (f"n_post_pad is {n}, expected {want}: each expert's pair count rounded up to a multiple of "
                f"block={block}, summed over the experts that get a pair (an expert with no pair gets no block)")
    if n > sorted_ids.numel():
        return f"n_post_pad={n} exceeds the {sorted_ids.numel()} entries of sorted_ids"
    body = sorted_ids[:n].long()
    real = (body >= 0) & (body < P)
    seen = torch.zeros(P, dtype=torch.long, device=body.device).scatter_add_(
        0, body[real], torch.ones_like(body[real]))
    twice = (seen > 1).nonzero()
    if twice.numel():
        p = int(twice[0])
        where = (body == p).nonzero().flatten()[:4].tolist()
        return (f"sorted_ids[:{n}] holds {_pair(p, k, ids)} {int(seen[p])} times (at {where}): every (token, "
                f"slot) pair appears exactly once, and padding entries hold the sentinel T*k = {P}, not a pair index")
    bad = (~real & (body != P)).nonzero()
    if bad.numel():
        i = int(bad[0])
        return (f"sorted_ids[{i}] = {int(body[i])} is neither a pair index in [0, {P}) nor the padding "
                f"sentinel T*k = {P}")
    missing = (seen == 0).nonzero()
    if missing.numel():
        return f"{_pair(int(missing[0]), k, ids)} is missing from sorted_ids[:{n}]: every pair appears exactly once"
    owners = expert_ids[:n // block].long()
    bad = ((owners < 0) | (owners >= E)).nonzero()
    if bad.numel():
        b = int(bad[0])
        return f"expert_ids[{b}] = {int(owners[b])} is not an expert in [0, {E}) (block {b} is below n_post_pad={n})"
    slot_owner = owners.repeat_interleave(block)
    wrong = (real & (ids[body.clamp(max=P - 1)] != slot_owner)).nonzero()
    if wrong.numel():
        i = int(wrong[0])
        return (f"sorted_ids[{i}] holds {_pair(int(body[i]), k, ids)} in block {i // block}, whose expert_ids "
                f"entry is {int(slot_owner[i])}: every pair of a block must be routed to the block's expert")
    down = (owners[1:] < owners[:-1]).nonzero()
    if down.numel():
        b = int(down[0])
        return (f"expert_ids[{b + 1}] = {int(owners[b + 1])} follows expert_ids[{b}] = {int(owners[b])}: "
                f"blocks go in ascending expert order, each expert's blocks together")
    return None


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    """Router-like ids (fused_moe's route(): skewed top-k of random logits, k distinct experts per token,
    the busiest expert about 3x the average load, some experts empty at small T). `dtype` names the
    model's activations and does not change the inputs (all integers)."""
    from benchmarks.registry import load_operator      # at call time: the registry loads this module
    T, k, E, block = _dims(dims)
    torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    _, topk_ids = load_operator("fused_moe").module.route(T, E, k, gen, device)
    return {"topk_ids": topk_ids, "E": E, "block": block}


def reference(topk_ids: torch.Tensor, E: int, block: int):
    """One valid layout, vLLM's: experts ascending, pairs in pair order inside a group, the sentinel after
    them; built without a host sync (also what --baseline times). Past n_post_pad: the sentinel, and -1
    for expert_ids."""
    T, k = topk_ids.shape
    P = T * k
    n_blocks = max_blocks(T, k, E, block)
    dev = topk_ids.device
    ids = topk_ids.reshape(-1).long()
    counts = expert_counts(topk_ids, E)
    padded = (counts + block - 1) // block * block
    start = torch.cumsum(padded, 0) - padded
    order = torch.argsort(ids, stable=True)                 # pairs grouped by expert, in pair order
    first = torch.cumsum(counts, 0) - counts
    e_of = ids[order]
    dest = start[e_of] + torch.arange(P, device=dev) - first[e_of]
    sorted_ids = torch.full((n_blocks * block,), P, dtype=torch.long, device=dev).scatter_(0, dest, order)
    end_block = torch.cumsum(padded, 0) // block              # block index where each expert's run ends
    blocks = torch.arange(n_blocks, device=dev)
    owner = torch.searchsorted(end_block, blocks, right=True)
    expert_ids = torch.where(owner < E, owner, -1)
    n_post_pad = padded.sum().reshape(1)
    return sorted_ids.to(torch.int32), expert_ids.to(torch.int32), n_post_pad.to(torch.int32)


def check(inputs: dict, outputs, reference_outputs=None) -> str | None:
    """None when the candidate's (sorted_ids, expert_ids, n_post_pad) is a valid layout for these ids,
    else the first broken invariant, named with the element, its value and what was expected. The
    reference's layout is one valid answer among many and is not compared with."""
    return check_layout(inputs["topk_ids"], int(inputs["E"]), int(inputs["block"]), *outputs)


def output_spec(dims, dtype: str):
    T, k, E, block = _dims(dims)
    torch_dtype(NAME, dtype)
    n = max_blocks(T, k, E, block)
    return (((n * block,), "int32"), ((n,), "int32"), ((1,), "int32"))


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: two integer adds per pair (its expert's count, its slot), counted at the fp32 rate; nothing
    floating-point. Q: topk_ids read once (T*k int32) and the three output buffers at their fixed sizes
    (max_blocks * block + max_blocks + 1 int32): an upper bound of what must be written (entries past
    n_post_pad need not be), above it by at most (E - 1) * block entries. At every hot shape the call moves
    under 1 MB and is bound by the latency floor, not by Q."""
    T, k, E, block = _dims(dims)
    torch_dtype(NAME, dtype)
    n = max_blocks(T, k, E, block)
    return {"fp32": 2.0 * T * k}, float(4 * T * k + 4 * (n * block + n + 1))


def interpreter_dims(dims) -> dict[str, int]:
    """T <= 16 (13 when the hot T is not a power of two), E <= 16 (some experts get no pair, as at real
    shapes), k <= E/2, block <= 32. Not more tokens: the interpreter's tl.sort took 9 s a call at 2080
    pairs (0.26 s at 128), so the seed's chunked path is left to its own tests, with small chunks."""
    T, k, E, block = _dims(dims)
    E = min(E, _INTERP_MAX["E"]) if is_pow2(E) else min(E, _INTERP_MAX["E"] - 3)
    return {"T": scale_down(T, _INTERP_MAX["T"], 13), "k": min(k, max(1, E // 2)), "E": E,
            "block": min(block, _INTERP_MAX["block"])}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes, each with the block the fused_moe seed would use: a tiny odd T at a hot (k, E);
    an expert count that is not a power of two; a non-power-of-two prefill T; and a T larger than every hot
    one (capped at 16384)."""
    hot = [dict(zip(("T", "k", "E", "block"), _dims(d))) for d in hot_dims] or [dict(d) for d in _FALLBACK_HOT]
    max_T = max(d["T"] for d in hot)

    def at(T: int, **override) -> dict[str, int]:
        d = dict(rng.choice(hot))
        d.update(T=T, **override)
        d["k"] = min(d["k"], d["E"])
        return {**d, "block": block_size(d["T"], d["k"], d["E"])}

    big_T = not_pow2(min(HOLDOUT_MAX_T, max_T + rng.randrange(1, max_T // 2 + 2)))
    if big_T <= max_T:
        big_T = max_T + 2 * rng.randrange(1, 32) + 1
    return [
        at(rng.choice([3, 5, 7, 9, 11])),
        at(not_pow2(rng.randrange(17, 256)), E=rng.choice(HOLDOUT_ODD_E)),
        at(not_pow2(rng.randrange(300, 3000))),
        at(big_T),
    ]


def occurrences(model_cfg: dict, tp: int, tokens: int) -> list[tuple[dict[str, int], int]]:
    """One call per MoE layer (Qwen3-30B-A3B, Qwen3-235B-A22B, DeepSeek-V3, Mixtral-8x7B, gpt-oss-120b,
    Qwen3-Next-80B in the serving mix) with T = tokens, at the block the fused_moe seed picks for that T.
    Experts are split over TP by their intermediate size, so every GPU aligns all T*k pairs over all E
    experts: tp does not change the shape. The fused_moe operator stands for the whole layer, alignment
    included, so its time and this one's overlap (as moe_sum_reduce's do). Dense models: none."""
    mc.check_call(NAME, tp, tokens)
    layers = mc.moe_layers(model_cfg)
    if not layers:
        return []
    E, k, T = mc.num_experts(model_cfg), int(model_cfg["num_experts_per_tok"]), int(tokens)
    return [({"T": T, "k": k, "E": E, "block": block_size(T, k, E)}, layers)]

