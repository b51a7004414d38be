"""l2_norm operator folder: work model by hand, the formula, the seed under the interpreter (one pass and
chunked, strided rows), an fp16 sum of squares, and per-model call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import load_seed, tolerance_failures
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("l2_norm")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_l2_norm_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 1024, "H": 128}, "bf16")
    assert W == {"fp32": 3 * 1024 * 128} == {"fp32": 393_216}
    assert Q == 2 * 1024 * 128 * 2 == 524_288           # x read + y written, 2 bytes each
    assert spec.module.work({"T": 3, "H": 100}, "fp32")[1] == 2 * 3 * 100 * 4


def test_reference_is_the_formula(spec):
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0], [1e-8, 0.0]])
    # row 0: norm 5; row 1: norm 0 -> divided by eps, stays 0; row 2: norm 1e-8 < eps=1e-6 -> 1e-8 / 1e-6
    expect = torch.tensor([[0.6, 0.8], [0.0, 0.0], [1e-2, 0.0]])
    torch.testing.assert_close(spec.reference(x, eps=1e-6), expect)
    assert spec.output_spec({"T": 5, "H": 7}, "bf16") == ((5, 7), "bf16")


def test_baseline_is_torch_normalize(spec):
    inputs = spec.make_inputs({"T": 6, "H": 128}, "fp32", seed=0)
    torch.testing.assert_close(spec.module.baseline(**inputs), spec.reference(**inputs), rtol=1e-6, atol=1e-7)


SMALL = [(1, 128), (3, 200), (5, 37), (2, 1000)]


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", SMALL)
def test_seed_matches_reference(spec, seed, T, H):
    inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T * 7 + H)
    before = inputs["x"].clone()
    out = seed.l2_norm(**inputs)
    assert torch.equal(inputs["x"], before)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_chunked_and_strided(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)        # 4 chunks of 64 for H=200
    wide = spec.make_inputs({"T": 3, "H": 232}, "fp32", seed=4)["x"]
    x = wide[:, 16:216]                                           # row stride 232
    assert x.stride() == (232, 1)
    out = seed.l2_norm(x, 1e-6)
    assert out.is_contiguous()
    assert tolerance_failures(out, spec.reference(x, 1e-6), spec.tolerance("fp32")) == []


def test_an_fp16_sum_of_squares_fails_the_fp32_check(spec):
    """What the interpreter's fp32 check sees of a kernel that squares and sums in fp16 (the red-team's
    rt_l2_norm_fp16_sum_of_squares): about 1e-3 relative error, 100x the fp32 bound."""
    x = spec.make_inputs({"T": 64, "H": 128}, "fp32", seed=0)["x"]
    bad = x / x.half().pow(2).sum(-1, keepdim=True, dtype=torch.float16).float().sqrt()
    assert tolerance_failures(bad, spec.reference(x), spec.tolerance("fp32"))


def test_holdout_dims_cover_odd_and_large(spec):
    hot = [{"T": t, "H": 128} for t in (8, 128, 512, 2048, 32768, 65536)]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > 65536 for d in hold) and any(d["H"] % 2 == 1 and d["H"] > 128 for d in hold)
        assert all(d["T"] <= spec.module.HOLDOUT_MAX_T + 1 for d in hold)


def test_occurrences_qwen3_next_tp2(spec):
    # 48 layers, every 4th full attention: 36 Gated DeltaNet layers x (q, k) = 72 calls;
    # 16 key heads / tp 2 = 8 heads per GPU -> 64 tokens x 8 rows of 128
    assert spec.module.occurrences(MODELS["qwen3-next-80b-a3b"], 2, 64) == [({"T": 512, "H": 128}, 72)]


def test_occurrences_none_without_linear_attention(spec):
    for name in ("llama-3.1-8b", "deepseek-v3", "qwen3-235b-a22b"):
        assert spec.module.occurrences(MODELS[name], 1, 64) == []
    with pytest.raises(ValueError, match="not divisible by tp=3"):
        spec.module.occurrences(MODELS["qwen3-next-80b-a3b"], 3, 64)
