"""Per-token-group fp8 quantization (DeepSeek-V3's activations): the reference, seeded inputs, the work model and
where models call it.

For each row t and group g of 128 channels: scale[t, g] = max(amax(|x[t, g*128:(g+1)*128]|), 1e-10) / 448;
xq = e4m3fn(clamp(x / scale, +-448)). scale is row-major [T, H/128]. Contract: benchmarks/operators/README.md;
the fp8 rules: benchmarks/fp8_quant.py.
"""
from __future__ import annotations

from collections import Counter

import torch

from benchmarks import fp8_quant as fq
from benchmarks import model_calls as mc
from benchmarks.inputs import not_pow2, outlier_activations, row_dims, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "per_token_group_quant_fp8"
SIGNATURE = "per_token_group_quant_fp8(x[T,H], group_size=128) -> (xq[T,H] float8_e4m3fn, scale[T,H/128] fp32)"
ARGS = ("x", "group_size")
OUTPUTS = ("xq", "scale")
GROUP = 128
DESCRIPTION = (
    "Per-token-group fp8 quantization of activations ahead of DeepSeek-V3's block-scaled fp8 GEMMs (128x128 "
    "weight blocks), as vLLM's and SGLang's per_token_group_quant_fp8: x is [T, H] (bf16/fp16/fp32, row "
    "stride may exceed H), group_size is 128 and divides H. For each row t and group g (channels g*128 to "
    "g*128+127): scale[t, g] = max(amax, 1e-10) / 448 with amax = max |x[t, group]| in fp32 (448 is "
    "float8_e4m3fn's largest value; the clamp keeps an all-zero group at a tiny positive scale and zeros "
    "instead of 0 / 0), and xq = x / scale[t, g] in fp32, clamped to [-448, 448] and rounded to the nearest "
    "float8_e4m3fn value (ties to even; on a GPU `.to(tl.float8e4nv)` does exactly that). Return (xq, "
    "scale): xq a new contiguous [T, H] torch.float8_e4m3fn tensor; scale a new fp32 [T, H/128] tensor in "
    "ROW-MAJOR layout (scale[t, g] at t * H/128 + g; not the column-major, TMA-aligned layout DeepGEMM "
    "wants), one scale per group, never one per row. Checked: every scale within 1e-6 relative; every xq "
    "equal to the reference's, or one e4m3fn step away only where x / scale sits within 2^-20 of a rounding "
    "midpoint. Inputs carry outlier channels 20-100x larger than the rest (so groups differ by 100x) and one "
    "all-zero row. H/128 is often not a power of two (7168 = 56 groups); T ranges from 1 to "
    "tens of thousands (MoE intermediates: tokens x 8 experts)."
    " " + fq.INTERPRETER_NOTE
)

# The fp8 envelope is one e4m3fn step (benchmarks/fp8_quant.py argues the bound); `check` is the exact rule.
# Scales: amax is exact; max(amax, 1e-10) / 448 computed another way differs by one fp32 ulp.
TOLERANCES = {
    "fp8": fq.FP8_TOLERANCE,
    "fp32": Tolerance(atol=0.0, rtol=1e-6, rel_l2=1e-6),
}
SCALE_RTOL = TOLERANCES["fp32"].rtol

OUTLIER_SHARE = 0.005
OUTLIER_SCALE = (20.0, 100.0)
_INTERP_MAX_T = 4


def _dims(dims) -> tuple[int, int]:
    T, H = row_dims(NAME, dims)
    if H % GROUP:
        raise ValueError(f"{NAME}: H={H} is not a multiple of the group size {GROUP}; use H = {GROUP} * k")
    return T, H


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    T, H = _dims(dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = outlier_activations(T, H, gen, device, OUTLIER_SHARE, OUTLIER_SCALE)
    return {"x": fq.with_padding_row(x, gen).to(torch_dtype(NAME, dtype)), "group_size": GROUP}


def _groups(x: torch.Tensor, group_size: int) -> torch.Tensor:
    T, H = x.shape
    return x.float().reshape(T, H // group_size, group_size)


def _scales(x: torch.Tensor, group_size: int) -> torch.Tensor:
    return _groups(x, group_size).abs().amax(dim=-1).clamp_min(fq.GROUP_AMAX_EPS) / fq.FP8_MAX


def reference(x: torch.Tensor, group_size: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    scale = _scales(x, group_size)
    xq = fq.quantize(_groups(x, group_size), scale[..., None]).reshape(x.shape)
    return xq, scale


def baseline(x: torch.Tensor, group_size: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user runs instead in PyTorch: the grouped view, amax, clamp, divide, cast (DeepSeek's act_quant
    math with the 1e-10 clamp of vLLM/SGLang)."""
    g = x.float().unflatten(-1, (-1, group_size))
    scale = g.abs().amax(dim=-1, keepdim=True).clamp(min=fq.GROUP_AMAX_EPS) / fq.FP8_MAX
    xq = (g / scale).clamp(-fq.FP8_MAX, fq.FP8_MAX).to(fq.FP8_DTYPE)
    return xq.flatten(-2), scale.squeeze(-1)


def check(inputs, outputs, reference_outputs) -> str | None:
    (xq, scale), (xq_ref, scale_ref) = outputs, reference_outputs
    x, group_size = inputs["x"], int(inputs["group_size"])
    unrounded = (x.double().reshape(scale_ref.shape[0], scale_ref.shape[1], group_size)
                 / scale_ref.double()[..., None]).reshape(x.shape)
    return fq.quant_problem(xq, scale, xq_ref, scale_ref, unrounded, SCALE_RTOL, "(row, group)")


def output_spec(dims, dtype: str):
    T, H = _dims(dims)
    torch_dtype(NAME, dtype)
    return ((T, H), "fp8"), ((T, H // GROUP), "fp32")


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 2 FLOPs per element (the max of |x| into the group's amax, the division by the scale), fp32 on CUDA
    cores. Q: x read once, xq written once (1 byte an element), one fp32 scale per 128 elements."""
    T, H = _dims(dims)
    b = torch.empty(0, dtype=torch_dtype(NAME, dtype)).element_size()
    return {"fp32": 2.0 * T * H}, float(T * H * b + T * H + 4 * T * (H // GROUP))


def interpreter_dims(dims) -> dict[str, int]:
    """At most 4 rows (3 when T is not a power of two) and 2 groups (3 when the hot group count is odd or
    not a power of two, so the non-power-of-two group count stays)."""
    T, H = _dims(dims)
    groups = H // GROUP
    return {"T": scale_down(T, _INTERP_MAX_T, 3), "H": GROUP * scale_down(groups, 2, 3)}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    """Four hidden shapes: a tiny odd T with an odd group count near a hot one, a non-power-of-two T at a hot
    H, a T larger than every hot T, and an odd group count larger than every hot one."""
    hot_T = sorted({int(d["T"]) for d in hot_dims}) or [1, 64, 4096]
    hot_G = sorted({int(d["H"]) // GROUP for d in hot_dims}) or [56]
    max_T, max_G = hot_T[-1], hot_G[-1]
    odd_near_hot = max((rng.choice(hot_G) - 2 * rng.randrange(1, 8)) | 1, 3)
    return [
        {"T": rng.choice([3, 5, 7, 11, 13]), "H": GROUP * odd_near_hot},
        {"T": not_pow2(rng.randrange(17, 2048)), "H": GROUP * rng.choice(hot_G)},
        {"T": not_pow2(max_T + rng.randrange(1, max_T // 2 + 2)), "H": GROUP * rng.choice(hot_G)},
        {"T": rng.choice([1, 2, 5]), "H": GROUP * ((max_G + 2 * rng.randrange(1, 8)) | 1)},
    ]


def occurrences(model_cfg: dict, tp: int, tokens: int, phase: str = "decode") -> list[tuple[dict[str, int], int]]:
    """Activation quantizations in one forward pass, per GPU, of a model with fp8 block-scaled weights
    (`weight_block_size: [128, 128]`: DeepSeek-V3), modelled on vLLM's DeepSeek-V3 at tensor parallelism tp:
    one call per fp8 linear input. Per layer (MLA): the fused q_a/kv_a projection's input [T, hidden], q_b's
    [T, q_lora_rank], o_proj's [T, heads / tp * v_head_dim]; in prefill also kv_b's [T, kv_lora_rank] (decode
    absorbs kv_b into the attention). Dense layers: gate_up's [T, hidden], down's [T, intermediate / tp]. MoE
    layers: the routed experts' input [T, hidden] and intermediate [T * top_k, moe_intermediate / tp] (the
    fused MoE quantizes both), the shared experts' gate_up [T, hidden] and down [T, n_shared *
    moe_intermediate / tp]. Models without block-scaled weights: none."""
    mc.check_call(NAME, tp, tokens)
    block = model_cfg.get("weight_block_size")
    if not block:
        return []
    if int(block[1]) != GROUP:
        raise ValueError(f"{NAME}.occurrences: weight_block_size {block} has a K block of {block[1]}; this "
                         f"operator's group is fixed at {GROUP}")
    T, layers = int(tokens), int(model_cfg["num_hidden_layers"])
    moe = mc.moe_layers(model_cfg)
    dense = layers - moe
    hidden = int(model_cfg["hidden_size"])
    calls: Counter = Counter()
    calls[(T, hidden)] += layers + dense + 2 * moe          # qkv_a; dense gate_up; routed and shared input
    calls[(T, int(model_cfg["q_lora_rank"]))] += layers
    heads = mc.per_gpu(NAME, model_cfg["num_attention_heads"], tp, "num_attention_heads")
    calls[(T, heads * int(model_cfg["v_head_dim"]))] += layers
    if phase == "prefill":
        calls[(T, int(model_cfg["kv_lora_rank"]))] += layers
    if dense:
        calls[(T, mc.per_gpu(NAME, model_cfg["intermediate_size"], tp, "intermediate_size"))] += dense
    if moe:
        moe_inter = mc.per_gpu(NAME, model_cfg["moe_intermediate_size"], tp, "moe_intermediate_size")
        calls[(T * int(model_cfg["num_experts_per_tok"]), moe_inter)] += moe
        shared = int(model_cfg.get("n_shared_experts", 0))
        if shared:
            calls[(T, shared * moe_inter)] += moe
    return [({"T": t, "H": h}, n) for (t, h), n in calls.items()]
