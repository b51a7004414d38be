"""agent/studies/seed_variants.py: every variant applies to its seed's CONFIGS (a path that names no key or an
edit that changes nothing fails), and the variants of the memory-bound operators are exact against the
operator's reference under the interpreter, on both sides of each decode/prefill threshold."""
import pytest

from agent.studies import measure_new_ops as m
from agent.studies import seed_variants as sv
from benchmarks.registry import load_operator

# operators whose variants steer new structural switches (issue 15); each runs at one interpreter shape
SWITCHED = ("layer_norm", "qk_rms_norm", "fused_add_rms_norm", "softmax", "per_token_group_quant_fp8",
            "moe_topk_softmax", "causal_conv1d_update", "rotary_embedding", "reshape_and_cache",
            "moe_align_block_size", "gated_rms_norm", "causal_conv1d", "rms_norm_quant_fp8")


def test_every_variant_applies_to_its_seed():
    for op in sv.VARIANTS:
        assert sv.check_variants(op, sv.load_seed(load_operator(op)).CONFIGS) == [], op


def test_a_path_that_names_no_key_or_an_edit_that_changes_nothing_fails(monkeypatch):
    cfg = {"by_block_h": {4096: {"ROWS": 1, "num_warps": 8}}, "BLOCK_V": 1024}
    with pytest.raises(KeyError):
        sv.set_path(sv.edited(cfg, {}), "by_block_h.4096.PRELOAD", 1)       # misspelt switch
    with pytest.raises(KeyError):
        sv.set_path(sv.edited(cfg, {}), "by_block_h.2048.ROWS", 2)          # no such bucket
    monkeypatch.setitem(sv.VARIANTS, "toy", [("typo", {"BLOCK_W": 2048}), ("same", {"BLOCK_V": 1024}),
                                             ("wild", {"by_block_h.*.ROWZ": 2}), ("ok", {"BLOCK_V": 2048})])
    problems = sv.check_variants("toy", cfg)
    assert [p.split(":")[1].split(" ")[0] for p in problems] == ["typo", "same", "wild"]


def test_every_switched_operator_has_variants():
    # at most 7: each variant costs GPU time on every hot shape
    for op in SWITCHED:
        assert 3 <= len(sv.VARIANTS[op]) <= 7, op


@pytest.mark.interpreter
@pytest.mark.parametrize("op", SWITCHED)
def test_variants_match_the_reference_on_both_sides_of_the_decode_threshold(op):
    spec = load_operator(op)
    shape = max((s for s in spec.shapes if s.hot), key=lambda s: s.weight)
    dims = spec.interpreter_dims(shape.dim)
    inputs = spec.make_inputs(dims, "fp32", seed=11)
    module = sv.load_seed(spec)
    sides = [None] + ([0, 1 << 30] if "decode_max_t" in module.CONFIGS else [])
    for decode_max_t in sides:
        if decode_max_t is not None:
            module.CONFIGS["decode_max_t"] = decode_max_t
        for name, overrides in sv.VARIANTS[op]:
            ok, _ = m._check(lambda i, f=sv.seed_variant(module, overrides): f(**i), inputs, inputs, spec, dims, "fp32")
            assert ok, (op, name, decode_max_t)
