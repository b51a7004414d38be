"""`aka trace`: run a model of configs/models.yaml, with random weights, under torch.profiler; write the trace.

The model is built by transformers' own modeling code from a config made of the published numbers in
configs/models.yaml (no download; weights are random, which changes no kernel's time). Modules are wrapped
in record_function ranges that name the aka operator and its shape (aka:rms_norm[T=64,H=4096],
aka:fused_moe[T,H,I,E,k], aka:mlp[T,I] around a dense MLP), so configs/kernel_map.yaml can attribute
transformers' eager kernels, which have generic names, to operators.

    prefill: one forward of input_ids [1, T]
    decode:  T sequences of `context` tokens are prefilled (not traced), then one step of [T, 1] is traced

`--layers N` builds only N decoder layers (the largest models do not fit on one GPU with all of them);
the per-layer kernels are the same, only the embedding and LM head weigh more in the shares.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# aka model name prefix -> transformers config class (transformers 5.x names)
FAMILIES = {"llama": "LlamaConfig", "qwen3": "Qwen3MoeConfig", "mixtral": "MixtralConfig",
            "deepseek": "DeepseekV3Config", "gpt-oss": "GptOssConfig"}


class TraceSetupError(ValueError):
    pass


def model_config(name: str, layers: int | None, overrides: dict | None = None):
    import transformers
    models = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())
    if name not in models:
        raise TraceSetupError(f"unknown model {name!r}; configs/models.yaml has {', '.join(models)}")
    family = next((cls for prefix, cls in FAMILIES.items() if name.startswith(prefix)), None)
    if family is None:
        raise TraceSetupError(f"model {name!r}: no transformers family known for it; known prefixes: "
                              f"{', '.join(FAMILIES)} (agent/trace_model.py FAMILIES)")
    fields = dict(models[name])
    if "num_experts" not in fields and "n_routed_experts" not in fields and family == "Qwen3MoeConfig":
        family = "Qwen3Config"
    fields.update(overrides or {})      # tests shrink a model to CPU size
    if layers is not None:
        fields["num_hidden_layers"] = int(layers)
        fields["first_k_dense_replace"] = min(int(fields.get("first_k_dense_replace", 0)), max(0, layers - 1))
    cfg = getattr(transformers, family)(**{k: v for k, v in fields.items() if not k.startswith("_")})
    cfg._attn_implementation = "sdpa"
    return cfg


def _annotate(model, tokens: int, cfg) -> list:
    """Forward hooks that open a record_function range named after the aka operator around each module."""
    import torch
    handles = []

    def wrap(module, label: str):
        state = {}

        def pre(mod, args):
            state["r"] = torch.profiler.record_function(label)
            state["r"].__enter__()

        def post(mod, args, out):
            state.pop("r").__exit__(None, None, None)
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))

    H = int(cfg.hidden_size)
    experts = getattr(cfg, "num_experts", None) or getattr(cfg, "n_routed_experts", None) or \
        getattr(cfg, "num_local_experts", None)
    for name, module in model.named_modules():
        cls = type(module).__name__
        if cls.endswith("RMSNorm") and getattr(module, "weight", None) is not None and module.weight.shape[-1] == H:
            wrap(module, f"aka:rms_norm[T={tokens},H={H}]")
        elif experts and ("Sparse" in cls or cls.endswith("MoE") or cls == "GptOssMLP"):
            inter = int(getattr(cfg, "moe_intermediate_size", None) or cfg.intermediate_size)
            k = int(getattr(cfg, "num_experts_per_tok", 0) or getattr(cfg, "num_experts_per_token", 0))
            wrap(module, f"aka:fused_moe[T={tokens},H={H},I={inter},E={experts},k={k}]")
        elif cls.endswith("MLP") and hasattr(module, "gate_proj"):
            wrap(module, f"aka:mlp[T={tokens},I={int(module.gate_proj.out_features)}]")
    return handles


def trace_model(name: str, phase: str, tokens: int, out: Path, layers: int | None = None, context: int = 512,
                warmup: int = 2, overrides: dict | None = None) -> dict:
    """Write a Chrome trace of one forward pass to `out`; returns the `aka` metadata stored in it."""
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile
    if phase not in ("prefill", "decode"):
        raise TraceSetupError(f"--phase {phase!r}: choose prefill or decode")
    if tokens < 1:
        raise TraceSetupError(f"--tokens {tokens}: at least 1")
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    cfg = model_config(name, layers, overrides)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model = model.to(dtype).eval()      # older transformers name the argument torch_dtype and ignore dtype
    vocab = int(cfg.vocab_size)
    with torch.no_grad():
        if phase == "prefill":
            ids, kwargs = torch.randint(0, vocab, (1, tokens), device=device), {}
        else:
            ctx = torch.randint(0, vocab, (tokens, context), device=device)
            past = model(ctx, use_cache=True).past_key_values
            ids, kwargs = torch.randint(0, vocab, (tokens, 1), device=device), {"past_key_values": past,
                                                                               "use_cache": True}
            model(ids, **kwargs)                # one untraced step warms the decode kernels; it grew the
            kwargs["past_key_values"] = model(ctx, use_cache=True).past_key_values   # cache, so build it again
        for _ in range(warmup if phase == "prefill" else 0):   # a decode step would grow the cache; the
            model(ids)                                          # context's prefill has warmed the kernels
        if cuda:
            torch.cuda.synchronize()
        handles = _annotate(model, tokens, cfg)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities, record_shapes=True) as prof:
            model(ids, **kwargs)
            if cuda:
                torch.cuda.synchronize()
        for h in handles:
            h.remove()
    out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out))
    meta = {"model": name, "phase": phase, "tokens": tokens, "layers": int(cfg.num_hidden_layers),
            "context": context if phase == "decode" else 0, "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__, "transformers": transformers.__version__}
    data = json.loads(out.read_text())
    data["aka"] = meta
    out.write_text(json.dumps(data))
    return meta
