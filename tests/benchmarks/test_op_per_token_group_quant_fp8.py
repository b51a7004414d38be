"""per_token_group_quant_fp8 operator folder: work model by hand, the formula (one scale per 128-channel group,
row-major), the seed under the interpreter (every config bucket, strided), what the check rejects, hold-outs
and DeepSeek-V3's call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import load_seed
import torch
import yaml

from benchmarks import fp8_quant as fq
from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("per_token_group_quant_fp8")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_per_token_group_quant_fp8_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "H": 7168}, "bf16")
    assert W == {"fp32": 2 * 64 * 7168}
    # x 917,504 B; xq 458,752 B; 64 x 56 fp32 scales = 14,336 B
    assert Q == 917_504 + 458_752 + 14_336
    assert spec.module.output_spec({"T": 3, "H": 384}, "bf16") == (((3, 384), "fp8"), ((3, 3), "fp32"))
    with pytest.raises(ValueError, match="multiple of the group size 128"):
        spec.module.output_spec({"T": 3, "H": 200}, "bf16")


def test_reference_is_the_formula(spec):
    x = torch.zeros(2, 256)
    x[0, 5], x[0, 130], x[0, 131] = -56.0, 0.5, 0.3
    xq, scale = spec.reference(x, 128)
    # group (0, 0): amax 56 -> scale 0.125; group (0, 1): amax 0.5 -> 0.5 / 448; row 1: max(0, 1e-10) / 448
    assert scale[0].tolist() == [0.125, pytest.approx(0.5 / 448, rel=1e-7)]
    assert scale[1].tolist() == [pytest.approx(fq.GROUP_AMAX_EPS / 448, rel=1e-7)] * 2
    assert xq[0, 5].float() == -448 and xq[0, 130].float() == 448
    assert xq[0, 131].float() == 256        # 0.3 * 896 = 268.8 -> 256 (spacing 32 in [256, 448])
    assert xq[1].float().abs().sum() == 0


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", [(1, 128), (5, 384), (3, 256), (40, 768)])
def test_seed_matches_reference(spec, seed, T, H):
    inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T + H)
    assert spec.module.check(inputs, seed.per_token_group_quant_fp8(**inputs), spec.reference(**inputs)) is None


@pytest.mark.interpreter
def test_seed_every_bucket_strided(spec, seed, monkeypatch):
    a = spec.make_inputs({"T": 3, "H": 512}, "bf16", seed=5)
    x = a["x"][:, 128:].t().contiguous().t()
    assert x.stride() == (1, 3)
    table = dict(seed.CONFIGS["by_pairs"])
    for pairs, cfg in table.items():
        monkeypatch.setitem(seed.CONFIGS, "by_pairs", {pairs: cfg})
        got = seed.per_token_group_quant_fp8(x, 128)
        assert spec.module.check({"x": x, "group_size": 128}, got, spec.reference(x, 128)) is None


def test_check_rejects_one_scale_per_row_and_accepts_the_baseline(spec):
    inputs = spec.make_inputs({"T": 8, "H": 1024}, "bf16", seed=2)
    ref = spec.reference(**inputs)
    assert spec.module.check(inputs, spec.module.baseline(**inputs), ref) is None
    x = inputs["x"].float()
    row_scale = (x.abs().amax(-1, keepdim=True).clamp_min(fq.GROUP_AMAX_EPS) / 448)
    per_row = (fq.quantize(x, row_scale), row_scale.expand(-1, 8).contiguous())
    assert "expected" in spec.module.check(inputs, per_row, ref)


def test_inputs(spec):
    a = spec.make_inputs({"T": 16, "H": 7168}, "bf16", seed=3)
    group_amax = a["x"].float().reshape(16, 56, 128).abs().amax(-1)
    assert int((group_amax.amax(-1) == 0).sum()) == 1 and a["group_size"] == 128
    # outlier channels make groups differ by more than 10x within a row: one scale per row is far off
    live = group_amax[group_amax.amax(-1) > 0]
    assert bool(((live.amax(-1) / live.amin(-1)) > 10).all())


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(30):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert all(d["H"] % 128 == 0 and d["T"] >= 1 for d in hold)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["H"] > max(h["H"] for h in hot) and (d["H"] // 128) % 2 for d in hold)


def test_interpreter_dims_keep_the_group(spec):
    assert spec.module.interpreter_dims({"T": 8192, "H": 7168}) == {"T": 4, "H": 384}
    assert spec.module.interpreter_dims({"T": 1, "H": 256}) == {"T": 1, "H": 256}


def test_occurrences(spec):
    calls = dict((tuple(d.values()), n) for d, n in spec.module.occurrences(MODELS["deepseek-v3"], 8, 16))
    # 61 layers: fused q_a/kv_a input; 3 dense gate_up; 58 MoE layers x (routed input + shared gate_up)
    assert calls[(16, 7168)] == 61 + 3 + 2 * 58
    assert calls[(16, 1536)] == 61 and calls[(16, 2048)] == 61        # q_b; o_proj (128 / 8 heads x 128)
    assert calls[(16, 2304)] == 3                                        # dense down: 18432 / 8
    assert calls[(16 * 8, 256)] == 58 and calls[(16, 256)] == 58         # routed intermediate, shared down
    assert (16, 512) not in calls                                        # kv_b: prefill only
    prefill = dict((tuple(d.values()), n) for d, n in spec.module.occurrences(MODELS["deepseek-v3"], 8, 16, "prefill"))
    assert prefill[(16, 512)] == 61
    assert spec.module.occurrences(MODELS["llama-3.1-70b-fp8"], 4, 16) == []
