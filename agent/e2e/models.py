"""Build a decoder from configs/models.yaml with random weights, through transformers' own modeling code.

Nothing is downloaded: the published configuration (hidden size, heads, experts...) is turned into the
transformers config class of the model's family and the model is built from it on the target device, then every
weight is drawn from a fixed seed (so stock and aka see the same weights, and two runs the same model).
Tensor parallelism is modelled as one GPU's shard: heads and intermediate sizes are divided by tp, as each of
tp GPUs runs them (vLLM's column/row-parallel layers); the vocabulary and the experts' count are kept.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MODELS_YAML = Path(__file__).resolve().parents[2] / "configs" / "models.yaml"

# Family of a configs/models.yaml name (by prefix) -> transformers config and causal-LM class names.
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen3": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),      # qwen3-30b-a3b, qwen3-235b-a22b: MoE
    "deepseek-v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM"),
}
# Families whose blocks aka's e2e does not map yet (their name would match a supported prefix).
UNSUPPORTED = {"qwen3-next": "hybrid linear attention (Gated DeltaNet) is not built by aka e2e yet; pick a Llama, "
                             "Qwen3-MoE, DeepSeek-V3 or Mixtral model"}
_SPLIT_BY_TP = ("intermediate_size", "moe_intermediate_size", "num_attention_heads")
_NOT_CONFIG = ("weight_block_size",)   # fp8 block scaling: the e2e model runs in bf16


class ModelError(ValueError):
    """A model that cannot be built as asked; the message says the value, the limit and a fix."""


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    tp: int
    layers: int                 # decoder layers built
    full_layers: int            # the published depth
    config: dict[str, Any] = field(default_factory=dict)   # what was handed to the transformers config
    weights: str = "random weights"                          # or where trained weights came from (--accuracy)

    def line(self) -> str:
        depth = "full depth" if self.layers == self.full_layers else f"{self.layers} of {self.full_layers} layers"
        return f"{self.name} ({self.family}, tp={self.tp}, {depth}, {self.weights})"


def load_models(path: Path = MODELS_YAML) -> dict[str, dict]:
    return yaml.safe_load(path.read_text())


def family_of(name: str) -> str:
    for prefix, why in UNSUPPORTED.items():    # checked first: their names also match a supported prefix
        if name.startswith(prefix):
            raise ModelError(f"model {name!r}: {why}")
    for prefix in sorted(FAMILIES, key=len, reverse=True):
        if name.startswith(prefix):
            return prefix
    raise ModelError(f"model {name!r} has no transformers family aka knows (known prefixes: "
                     f"{', '.join(sorted(FAMILIES))}); add its family to agent/e2e/models.py FAMILIES")


def shard_config(published: dict, tp: int, layers: int | None) -> tuple[dict, int]:
    """The per-GPU config of one tp shard with `layers` decoder layers (None: all). Pure, CPU-testable."""
    if tp < 1:
        raise ModelError(f"--tp {tp}: tensor parallelism must be at least 1")
    cfg = {k: v for k, v in published.items() if k not in _NOT_CONFIG}
    for key in _SPLIT_BY_TP:
        if key in cfg:
            if cfg[key] % tp:
                raise ModelError(f"{key}={cfg[key]} does not split over tp={tp}; pick a tp that divides it")
            cfg[key] //= tp
    if "num_key_value_heads" in cfg:      # fewer KV heads than GPUs: each GPU keeps one (replicated), as vLLM does
        cfg["num_key_value_heads"] = max(1, cfg["num_key_value_heads"] // tp)
    full = int(cfg["num_hidden_layers"])
    n = full if layers is None else int(layers)
    if not 1 <= n <= full:
        raise ModelError(f"--layers {n}: must lie in [1, {full}] for this model (its published depth)")
    cfg["num_hidden_layers"] = n
    if "first_k_dense_replace" in cfg and n < full:
        # A few layers of DeepSeek-V3: keep one dense layer (its first 3 are dense) and make the rest MoE, so both
        # kinds of MLP are measured.
        cfg["first_k_dense_replace"] = min(cfg["first_k_dense_replace"], 1 if n > 1 else 0)
    return cfg, full


def build(name: str, *, tp: int = 1, layers: int | None = None, device: str = "cuda", seed: int = 0,
          overrides: dict | None = None, models: dict | None = None, dtype: str = "bf16"):
    """(model, info): the decoder in `dtype` (bf16; fp32 under the CPU interpreter, whose bf16 is unreliable) on
    `device`, eval mode, weights drawn from `seed`.

    `overrides` replace config fields after sharding (tests build a tiny model this way)."""
    import torch
    import transformers
    models = load_models() if models is None else models
    if name not in models:
        raise ModelError(f"unknown model {name!r}; configs/models.yaml has: {', '.join(sorted(models))}")
    family = family_of(name)
    cfg_dict, full = shard_config(models[name], tp, layers)
    cfg_dict.update(overrides or {})
    config_cls, model_cls = (getattr(transformers, n) for n in FAMILIES[family])
    config = config_cls(**cfg_dict, attn_implementation="sdpa")
    old = torch.get_default_dtype()
    torch.set_default_dtype({"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype])
    try:
        with torch.device(device):
            model = model_cls(config)
    finally:
        torch.set_default_dtype(old)
    randomize(model, seed)
    model.eval()
    info = ModelInfo(name=name, family=family, tp=tp, layers=cfg_dict["num_hidden_layers"],
                     full_layers=full if not overrides or "num_hidden_layers" not in overrides
                     else cfg_dict["num_hidden_layers"], config=cfg_dict)
    return model, info


def randomize(model, seed: int) -> None:
    """Every parameter from one seed: matrices N(0, 0.02) as at pre-training init, norm weights uniform in
    [0.5, 1.5] (trained models' norm weights spread that far; never all 1, so a kernel that ignores the weight shows
    up in the drift), biases small. transformers' own init
    is not relied on: some expert tensors are created with torch.empty and left to a loader."""
    import torch
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02, generator=gen)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.01, generator=gen)
            else:
                p.uniform_(0.5, 1.5, generator=gen)
