"""moe_sum_reduce operator folder: work model by hand, the formula, router-like weights, the seed under
the interpreter (every config bucket, strided weights), hold-outs with a k no model uses, call counts."""
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
    return load_operator("moe_sum_reduce")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_moe_sum_reduce_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "k": 8, "H": 7168}, "bf16")
    assert W == {"fp32": 2 * 64 * 8 * 7168}
    # x: 64*8*7168*2 B = 7,340,032; weights: 64*8*4 = 2,048; out: 64*7168*2 = 917,504
    assert Q == 7_340_032 + 2_048 + 917_504


def test_reference_is_the_formula(spec):
    x = torch.tensor([[[1.0, 2.0], [10.0, 20.0]]])
    w = torch.tensor([[0.25, 0.75]])
    torch.testing.assert_close(spec.reference(x, w), torch.tensor([[7.75, 15.5]]))
    assert spec.output_spec({"T": 3, "k": 4, "H": 5}, "bf16") == ((3, 5), "bf16")


def test_weights_are_router_probabilities(spec):
    w = spec.make_inputs({"T": 256, "k": 8, "H": 64}, "bf16", seed=0)["weights"]
    assert w.dtype == torch.float32 and (w > 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(256))
    assert 0.25 < w.max(-1).values.mean().item() < 0.6


@pytest.mark.interpreter
@pytest.mark.parametrize("T, k, H", [(1, 8, 256), (3, 2, 37), (20, 10, 300), (300, 3, 65)])
def test_seed_matches_reference(spec, seed, T, k, H):
    inputs = spec.make_inputs({"T": T, "k": k, "H": H}, "fp32", seed=T + k + H)
    out = seed.moe_sum_reduce(**inputs)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_strided_weights(spec, seed):
    inputs = spec.make_inputs({"T": 5, "k": 4, "H": 100}, "fp32", seed=1)
    w = inputs["weights"].t().contiguous().t()              # column-major [T, k]
    assert w.stride() == (1, 5)
    out = seed.moe_sum_reduce(inputs["x"], w)
    assert tolerance_failures(out, spec.reference(inputs["x"], w), spec.tolerance("fp32")) == []


def test_an_unweighted_sum_fails(spec):
    inputs = spec.make_inputs({"T": 16, "k": 8, "H": 256}, "bf16", seed=2)
    ref = spec.reference(**inputs)
    assert tolerance_failures(inputs["x"].float().sum(1).to(torch.bfloat16), ref, spec.tolerance("bf16"))
    assert tolerance_failures(spec.module.baseline(**inputs), ref, spec.tolerance("bf16")) == []


def test_holdouts_include_a_k_no_model_uses(spec):
    hot = [s.dim for s in spec.shapes]
    hot_k = {d["k"] for d in hot}
    for s in range(30):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["k"] not in hot_k for d in hold)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)


def test_occurrences(spec):
    # DeepSeek-V3: 61 layers, the first 3 dense -> 58 MoE layers; k=8 over the full hidden size at any tp
    assert spec.module.occurrences(MODELS["deepseek-v3"], 8, 64) == [({"T": 64, "k": 8, "H": 7168}, 58)]
    assert spec.module.occurrences(MODELS["mixtral-8x7b"], 2, 16) == [({"T": 16, "k": 2, "H": 4096}, 32)]
    assert spec.module.occurrences(MODELS["llama-3.1-8b"], 1, 16) == []
