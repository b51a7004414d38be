"""gated_rms_norm operator folder: work model by hand, the formula (norm, then gate), the seed under the
interpreter (one pass, chunked, strided), what the tolerances catch, and per-model call counts."""
import math
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
    return load_operator("gated_rms_norm")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_gated_rms_norm_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 4096, "H": 128}, "bf16")
    assert W == {"fp32": 9 * 4096 * 128} == {"fp32": 4_718_592}
    # x and z read, y written (3 * 4096 * 128 * 2 B) + weight (128 * 2 B)
    assert Q == 3_145_728 + 256


def test_reference_is_the_formula(spec):
    x = torch.tensor([[3.0, 4.0]])
    z = torch.tensor([[0.0, 2.0]])
    w = torch.tensor([2.0, 0.5])
    # rms = sqrt(12.5); silu(0) = 0, silu(2) = 2 / (1 + e^-2)
    expect = torch.tensor([[0.0, 4 / math.sqrt(12.5) * 0.5 * 2 / (1 + math.exp(-2))]])
    torch.testing.assert_close(spec.reference(x, z, w, eps=0.0), expect)


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", [(1, 128), (5, 37), (3, 200), (2, 1000)])
def test_seed_matches_reference(spec, seed, T, H):
    inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T + H)
    out = seed.gated_rms_norm(**inputs)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_chunked_and_strided(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)
    a = spec.make_inputs({"T": 3, "H": 232}, "fp32", seed=5)
    x, z, w = a["x"][:, 8:208], a["z"][:, :200].t().contiguous().t(), a["weight"][:200]
    assert x.stride() == (232, 1) and z.stride() == (1, 3)
    out = seed.gated_rms_norm(x, z, w, 1e-6)
    assert tolerance_failures(out, spec.reference(x, z, w, 1e-6), spec.tolerance("fp32")) == []


def test_skipping_the_weight_or_gating_first_fails(spec):
    inputs = spec.make_inputs({"T": 16, "H": 128}, "bf16", seed=1)
    x, z, w = inputs["x"].float(), inputs["z"].float(), inputs["weight"].float()
    ref = spec.reference(**inputs)
    tol = spec.tolerance("bf16")
    silu = torch.nn.functional.silu
    no_weight = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * silu(z)
    gated = x * silu(z)
    gate_first = gated * torch.rsqrt(gated.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    for bad in (no_weight, gate_first):
        assert tolerance_failures(bad.to(torch.bfloat16), ref, tol)
    assert tolerance_failures(spec.module.baseline(**inputs), ref, tol) == []


def test_inputs(spec):
    a = spec.make_inputs({"T": 64, "H": 128}, "fp32", seed=3)
    assert 1.5 < a["z"].std().item() < 2.5 and (a["z"] < -1).any()
    assert 0.05 < a["weight"].std().item() < 0.15
    assert set(a) == set(spec.arg_names)


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["H"] % 2 for d in hold)


def test_occurrences(spec):
    # 36 Gated DeltaNet layers, one norm each; 32 value heads / tp 2 = 16 heads x 256 tokens
    assert spec.module.occurrences(MODELS["qwen3-next-80b-a3b"], 2, 256) == [({"T": 4096, "H": 128}, 36)]
    assert spec.module.occurrences(MODELS["qwen3-next-80b-a3b"], 1, 1) == [({"T": 32, "H": 128}, 36)]
    assert spec.module.occurrences(MODELS["llama-3.1-70b"], 8, 64) == []
