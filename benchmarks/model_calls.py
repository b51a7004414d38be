"""What the operator folders' occurrences() share about model configurations (configs/models.yaml):
tensor-parallel splits, MoE layers, hybrid linear-attention layers and how many rows a sampler sees.

Plain dict arithmetic, no torch: the weights script imports every operator's occurrences through here.
"""
from __future__ import annotations

MOE_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
# Sampling runs once per sequence: every decode token ends a sequence's step, a prefill chunk ends few.
# Our assumption (not a fleet measurement): prefill chunks pack prompts of this many tokens on average,
# so a chunk of T tokens samples max(1, T // PREFILL_TOKENS_PER_SEQUENCE) rows.
PREFILL_TOKENS_PER_SEQUENCE = 2048


def check_call(op: str, tp: int, tokens: int) -> None:
    if tp < 1 or tokens < 1:
        raise ValueError(f"{op}.occurrences: tp={tp} and tokens={tokens} must both be >= 1")


def per_gpu(op: str, size: int, tp: int, what: str) -> int:
    """`size` split over `tp` GPUs; a size tp does not divide is a configuration error, said as such."""
    if int(size) % tp:
        raise ValueError(f"{op}.occurrences: {what}={size} is not divisible by tp={tp}; "
                         f"use a tensor-parallel degree that divides it")
    return int(size) // tp


def num_experts(cfg: dict) -> int | None:
    for key in MOE_EXPERT_KEYS:
        if cfg.get(key):
            return int(cfg[key])
    return None


def moe_layers(cfg: dict) -> int:
    """Layers with routed experts (DeepSeek-V3's first `first_k_dense_replace` layers are dense)."""
    if num_experts(cfg) is None:
        return 0
    return int(cfg["num_hidden_layers"]) - int(cfg.get("first_k_dense_replace", 0))


def linear_attention_layers(cfg: dict) -> int:
    """Gated DeltaNet layers of a hybrid model (Qwen3-Next: all but every full_attention_interval-th)."""
    if not cfg.get("linear_num_value_heads"):
        return 0
    layers, interval = int(cfg["num_hidden_layers"]), int(cfg.get("full_attention_interval", 0))
    return layers - (layers // interval if interval else 0)


def sampled_rows(tokens: int, phase: str) -> int:
    """Rows of logits a sampler sees in one forward pass of `tokens` tokens (one per sequence)."""
    if phase == "decode":
        return int(tokens)
    if phase == "prefill":
        return max(1, int(tokens) // PREFILL_TOKENS_PER_SEQUENCE)
    raise ValueError(f"phase {phase!r} is not decode or prefill")


def attention_heads(op: str, cfg: dict, tp: int) -> tuple[int, int]:
    """(query heads, key/value heads) of one GPU: query heads split over TP; KV heads split while there are
    enough of them and replicated beyond (vLLM keeps at least one KV head per GPU)."""
    q = per_gpu(op, cfg["num_attention_heads"], tp, "num_attention_heads")
    kv = int(cfg["num_key_value_heads"])
    if kv >= tp:
        return q, per_gpu(op, kv, tp, "num_key_value_heads")
    if tp % kv:
        raise ValueError(f"{op}.occurrences: tp={tp} is not a multiple of num_key_value_heads={kv}, so the KV "
                         f"heads cannot be replicated evenly; use a tp that {kv} divides or that divides {kv}")
    return q, 1


def full_attention_layers(cfg: dict) -> int:
    """Softmax-attention layers (a hybrid model's others are linear attention: model_calls.linear_attention_layers)."""
    return int(cfg["num_hidden_layers"]) - linear_attention_layers(cfg)


def short_conv_channels(cfg: dict) -> int:
    """Channels of a Gated DeltaNet layer's short causal conv (over q, k and v), before the TP split."""
    return (2 * int(cfg["linear_num_key_heads"]) * int(cfg["linear_key_head_dim"])
            + int(cfg["linear_num_value_heads"]) * int(cfg["linear_value_head_dim"]))
