"""agent/studies/variant_counters.py on the CPU: the names it checks before any ncu run, the generated file through
which ncu profiles a seed variant (loaded as sandbox.ncu_target loads a candidate, and called here under the
interpreter), and the table of a record without counters. ncu itself runs on the GPU machine."""
import pytest

from agent.studies import seed_variants as sv
from agent.studies import variant_counters as vc
from benchmarks.registry import load_operator


def test_an_unknown_shape_or_variant_stops_the_study_naming_the_choices():
    with pytest.raises(SystemExit, match="no hot shape T3-V7.*T64-V151936"):
        vc.plan("softmax", ["T3-V7"], ["seed"])
    with pytest.raises(SystemExit, match="no variant nope; its variants: seed, two_pass"):
        vc.plan("softmax", ["T64-V151936"], ["seed", "nope"])
    shapes, names = vc.plan("softmax", ["T64-V151936"], ["seed", "two_pass"])
    assert shapes == [{"shape": "T64-V151936", "dims": {"T": 64, "V": 151936}, "dtype": "bf16"}]


@pytest.mark.interpreter
def test_the_variant_file_runs_the_seed_with_the_variants_configs(tmp_path, monkeypatch):
    """The generated file for layer_norm's `masked` runs the seed with even = 0: the result matches the reference,
    and the seed module it loaded saw CONFIGS["even"] == 0 during the call (the variant, not the seed)."""
    torch = pytest.importorskip("torch")
    from sandbox.ncu_target import load_candidate
    assert dict(sv.VARIANTS["layer_norm"])["masked"] == {"even": 0}
    path = tmp_path / "layer_norm_masked.py"
    path.write_text(vc.WRAPPER.format(op="layer_norm", variant="masked"))
    fn = load_candidate(str(path), "layer_norm")
    module = fn.__globals__["_module"]
    seen = []
    monkeypatch.setattr(module, "_even", lambda cfg, H, block_h: seen.append(module.CONFIGS["even"]) or 0)
    spec = load_operator("layer_norm")
    inputs = spec.make_inputs({"T": 2, "H": 256}, "fp32", 0, "cpu")
    torch.testing.assert_close(fn(**inputs), spec.reference(**inputs), atol=1e-4, rtol=1e-4)
    assert seen == [0] and module.CONFIGS["even"] == 1            # the variant's, then the seed's again


def test_a_record_without_counters_says_why():
    rec = {"shape": "T64-V151936", "variant": "seed", "counters": {"shapes": [], "reason": "ncu not found"}}
    lines = vc.table_lines([rec])
    assert "not collected: ncu not found" in lines[1]
