"""KV-cache write (vLLM's reshape_and_cache_flash): the reference, seeded inputs, the work model and where models
call it.

key_cache[slot // BS, slot % BS] = key[t] and value_cache[...] = value[t] for every token t with
slot = slot_mapping[t] >= 0; every other cache slot unchanged. The caches are written in place (MUTATES) and
the call returns None (OUTPUTS = ()). Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import not_pow2, torch_dtype
from benchmarks.spec import Tolerance

NAME = "reshape_and_cache"
SIGNATURE = ("reshape_and_cache(key[T,Hk,D], value[T,Hk,D], key_cache[NB,BS,Hk,D], value_cache[NB,BS,Hk,D], "
             "slot_mapping[T] int64) -> None (writes key_cache and value_cache)")
ARGS = ("key", "value", "key_cache", "value_cache", "slot_mapping")
OUTPUTS = ()
MUTATES = ("key_cache", "value_cache")
DESCRIPTION = (
    "Writes this step's keys and values into a paged KV cache, as vLLM's reshape_and_cache_flash does before "
    "attention in every layer. key and value are [T, Hk, D] (T tokens, Hk KV heads on this GPU, head size D; "
    "rows may be strided views into the QKV projection's output, the last dim is contiguous); key_cache and "
    "value_cache are [NB, BS, Hk, D] contiguous (NB blocks of BS = 16 slots) in the same dtype (bf16, fp16 "
    "or fp32). slot_mapping[T] (int64) gives each token's slot: block slot // BS, offset slot % BS. For "
    "every t with slot_mapping[t] >= 0 copy key[t] to key_cache[slot // BS, slot % BS] and value[t] to "
    "value_cache[same]; slot -1 marks a padding token (a CUDA-graph batch padded to a captured size) that "
    "writes nothing. Every other slot of both caches must be left exactly as it was: it holds other "
    "tokens' keys and values. Slots in one call are distinct. The call returns None; its result is the two "
    "caches, compared whole and bit for bit (a copy is exact). The other arguments must not be written. "
    "Block 0 is the engine's null block and never mapped. T ranges from 1 (decode) to thousands (prefill); "
    "Hk*D is 128 to 1024, not always a power of two in hidden shapes."
)

# A copy: the caches must equal the reference bit for bit (atol = rtol = 0, so any changed element fails).
# rel_l2 only has to be positive for the contract; it can never decide when the elementwise bound is exact.
_EXACT = Tolerance(atol=0.0, rtol=0.0, rel_l2=1e-9)
TOLERANCES = {"bf16": _EXACT, "fp16": _EXACT, "fp32": _EXACT}

BLOCK_SIZE = 16                  # vLLM's default KV-cache block size on CUDA
CONTEXT_BLOCKS = 4               # a sequence's new tokens start at a random offset in its first 4 blocks
SPARE_BLOCKS = 16                # blocks no sequence of this step touches (other requests' contexts)
HOLDOUT_MAX_T = 1 << 14


def _dims(dims) -> tuple[int, int, int, int, int]:
    T, S, Hk, D, BS = (int(dims[k]) for k in ("T", "S", "Hk", "D", "BS"))
    if min(T, S, Hk, D, BS) < 1 or S > T:
        raise ValueError(f"{NAME}: dims T={T}, S={S}, Hk={Hk}, D={D}, BS={BS} must be >= 1 with S (sequences) <= T")
    return T, S, Hk, D, BS


def padding(T: int) -> int:
    """Padding tokens (slot -1) at the end of the batch: about 1/16 of it, at least one from T = 2 on."""
    return 0 if T < 2 else max(1, T // 16)


def num_blocks(dims) -> int:
    """NB: every block the step's S sequences touch (at most cdiv(T, BS) + 2S with offsets into their
    blocks), the null block 0 and SPARE_BLOCKS blocks of other requests."""
    T, S, _, _, BS = _dims(dims)
    return 1 + -(-T // BS) + 2 * S + SPARE_BLOCKS


def _slot_mapping(T: int, S: int, BS: int, NB: int, gen, device) -> torch.Tensor:
    """Each of S sequences appends its share of the T - padding tokens after a random context length, into
    blocks of its own drawn at random from 1..NB-1 (vLLM's null block 0 is never handed out)."""
    real = T - padding(T)
    S = min(S, max(real, 1))
    cuts = torch.sort(torch.randperm(max(real - 1, 1), generator=gen)[:S - 1] + 1).values.tolist() if S > 1 else []
    lengths = [b - a for a, b in zip([0] + cuts, cuts + [real])]
    free = (torch.randperm(NB - 1, generator=gen) + 1).tolist()
    slots = []
    for n in lengths:
        ctx = int(torch.randint(0, CONTEXT_BLOCKS * BS, (1,), generator=gen))
        first, last = ctx // BS, (ctx + n - 1) // BS
        blocks = [free.pop() for _ in range(last - first + 1)]
        slots += [blocks[(ctx + i) // BS - first] * BS + (ctx + i) % BS for i in range(n)]
    slots += [-1] * (T - len(slots))
    return torch.tensor(slots, dtype=torch.int64).to(device)


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, S, Hk, D, BS = _dims(dims)
    tdt = torch_dtype(NAME, dtype)
    NB = num_blocks(dims)
    gen = torch.Generator()            # the slot mapping is drawn on the CPU: one code path for every device
    gen.manual_seed(int(seed))
    slot_mapping = _slot_mapping(T, S, BS, NB, gen, device)
    dgen = torch.Generator(device=device)
    dgen.manual_seed(int(seed) + 1)
    # key and value are views into the fused QKV projection's output [T, (Hq + 2 Hk) D], as in vLLM
    qkv = torch.randn(T, 4 * Hk * D, generator=dgen, device=device, dtype=torch.float32).to(tdt)
    key = qkv[:, 2 * Hk * D:3 * Hk * D].view(T, Hk, D)
    value = qkv[:, 3 * Hk * D:].view(T, Hk, D)
    # the caches hold other tokens' keys and values (never zeros): they must survive the call
    key_cache = torch.randn(NB, BS, Hk, D, generator=dgen, device=device, dtype=torch.float32).to(tdt)
    value_cache = torch.randn(NB, BS, Hk, D, generator=dgen, device=device, dtype=torch.float32).to(tdt)
    return {"key": key, "value": value, "key_cache": key_cache, "value_cache": value_cache,
            "slot_mapping": slot_mapping}


def reference(key, value, key_cache, value_cache, slot_mapping) -> None:
    BS = key_cache.shape[1]
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    key_cache[slots // BS, slots % BS] = key[keep]
    value_cache[slots // BS, slots % BS] = value[keep]


def baseline(key, value, key_cache, value_cache, slot_mapping) -> None:
    """What a user runs instead in PyTorch, capturable in a CUDA graph (no boolean indexing, which syncs the
    host): index_copy_ into the caches viewed as [NB*BS, Hk, D]; padding tokens are sent to slot 0 (the null
    block, never mapped) carrying slot 0's own values, so they change nothing."""
    NB, BS, Hk, D = key_cache.shape
    pad = (slot_mapping < 0)[:, None, None]
    slots = slot_mapping.clamp_min(0)
    for src, cache in ((key, key_cache), (value, value_cache)):
        flat = cache.view(NB * BS, Hk, D)
        flat.index_copy_(0, slots, torch.where(pad, flat[slots], src))


def output_spec(dims, dtype: str) -> tuple:
    _dims(dims)
    torch_dtype(NAME, dtype)
    return ()


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: no arithmetic; one move per element of key and value is counted so W is not zero (the roofline is
    bound by Q about 1000x over any FLOP peak either way). Q: key and value read once and their slots written
    once in each cache (2 x 2 x T*Hk*D elements), slot_mapping read (8 B per token). The caches' other slots
    are neither read nor written."""
    T, _, Hk, D, _ = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 2.0 * T * Hk * D}, float(4 * T * Hk * D * b + 8 * T)


def interpreter_dims(dims) -> dict[str, int]:
    T, S, Hk, D, BS = _dims(dims)
    t = T if T <= 5 else 5
    return {"T": t, "S": min(S, t), "Hk": min(Hk, 2), "D": D if D <= 64 else 64 if D % 2 == 0 else 45, "BS": BS}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """A tiny odd batch with an odd head size, a prefill batch of a non-power-of-two T, a T larger than every
    hot one (capped so the caches fit), and a decode batch with one sequence per token."""
    hot = [dict(d) for d in hot_dims] or [{"T": 64, "S": 64, "Hk": 8, "D": 128, "BS": BLOCK_SIZE}]
    base = rng.choice(hot)
    max_T = max(int(d["T"]) for d in hot)
    big = not_pow2(min(max_T + rng.randrange(1, max_T // 2 + 2), HOLDOUT_MAX_T))
    mid = not_pow2(rng.randrange(17, 2048))
    small = rng.choice([3, 5, 7])
    return [
        {**base, "T": small, "S": small, "D": (int(base["D"]) - 2 * rng.randrange(1, 8)) | 1},
        {**base, "T": mid, "S": max(1, mid // 700)},
        {**base, "T": big, "S": max(1, big // 2048)},
        {**base, "T": small + 10, "S": small + 10, "Hk": int(base["Hk"]) + 1},
    ]


def occurrences(model_cfg: dict, tp: int, tokens: int, phase: str = "decode") -> list[tuple[dict[str, int], int]]:
    """KV-cache writes in one forward pass, per GPU: one per full-attention layer (Qwen3-Next: every
    full_attention_interval-th layer; its linear-attention layers keep a state, not a cache), over this GPU's
    KV heads (num_key_value_heads / tp, one when tp exceeds them: replicated), head_dim D, block size 16.
    Sequences: one per token in decode, one per 2048 prefill tokens (model_calls.sampled_rows). Llama 3.1,
    Qwen3 (dense and MoE), Mixtral, gpt-oss and Qwen3-Next. DeepSeek-V3's MLA caches a compressed latent with
    another kernel (concat_and_cache_mla): none here."""
    mc.check_call(NAME, tp, tokens)
    if not model_cfg.get("num_key_value_heads") or not model_cfg.get("head_dim"):
        return []
    layers = int(model_cfg["num_hidden_layers"]) - mc.linear_attention_layers(model_cfg)
    kv = int(model_cfg["num_key_value_heads"])
    heads = mc.per_gpu(NAME, kv, tp, "num_key_value_heads") if kv >= tp else 1
    dims = {"T": int(tokens), "S": mc.sampled_rows(tokens, phase), "Hk": heads, "D": int(model_cfg["head_dim"]),
            "BS": BLOCK_SIZE}
    return [(dims, layers)]
