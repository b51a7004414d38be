"""per_token_quant_fp8 operator folder: work model by hand, the formula and its floor, the seed under the
interpreter (one pass, chunked, strided, bf16), what the check rejects, hold-outs and per-model call counts."""
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
    return load_operator("per_token_quant_fp8")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_per_token_quant_fp8_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "H": 7168}, "bf16")
    assert W == {"fp32": 2 * 64 * 7168}
    # x 64*7168*2 B = 917,504; xq 458,752 B; scales 64*4 = 256 B
    assert Q == 917_504 + 458_752 + 256
    assert spec.module.output_spec({"T": 3, "H": 5}, "bf16") == (((3, 5), "fp8"), ((3,), "fp32"))


def test_reference_is_the_formula(spec):
    x = torch.tensor([[224.0, -3.0, 1.3], [0.0, 0.0, 0.0], [1e-4, -2e-4, 0.0]])
    xq, scale = spec.reference(x)
    # row 0: amax 224 -> scale 0.5; 1.3 / 0.5 = 2.6 rounds to 2.5 (e4m3 spacing 0.25 in [2, 4))
    assert scale.tolist()[0] == 0.5 and xq[0].float().tolist() == [448.0, -6.0, 2.5]
    # rows 1 and 2: the floor 1 / (448 * 512); 2e-4 * 229376 = 45.9 -> 44 (spacing 4 in [32, 64))
    assert scale[1].item() == scale[2].item() == pytest.approx(fq.PER_TOKEN_MIN_SCALE, rel=1e-7)
    assert xq[1].float().abs().sum() == 0 and xq[2, 1].float().item() == -44.0


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", [(1, 128), (5, 37), (3, 200), (4, 1000)])
def test_seed_matches_reference(spec, seed, T, H):
    inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T + H)
    assert spec.module.check(inputs, seed.per_token_quant_fp8(**inputs), spec.reference(**inputs)) is None


@pytest.mark.interpreter
def test_seed_chunked_strided_bf16(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)
    a = spec.make_inputs({"T": 3, "H": 232}, "bf16", seed=5)
    x = a["x"][:, 8:208].t().contiguous().t()
    assert x.stride() == (1, 3)
    assert spec.module.check({"x": x}, seed.per_token_quant_fp8(x), spec.reference(x)) is None


def test_check_rejects_truncation_and_accepts_the_baseline(spec):
    inputs = spec.make_inputs({"T": 16, "H": 2048}, "bf16", seed=1)
    ref = spec.reference(**inputs)
    assert spec.module.check(inputs, spec.module.baseline(**inputs), ref) is None
    xq, scale = ref
    v = inputs["x"].float() / scale[:, None]
    nearest = xq.float()
    codes = xq.view(torch.uint8).to(torch.int16)
    toward_zero = torch.where(nearest.abs() > v.abs(), codes - 1, codes).to(torch.uint8).view(torch.float8_e4m3fn)
    assert "not at a rounding midpoint" in spec.module.check(inputs, (toward_zero, scale), ref)


def test_inputs_have_one_padding_row(spec):
    a = spec.make_inputs({"T": 64, "H": 1024}, "bf16", seed=3)
    assert int((a["x"].float().abs().amax(-1) == 0).sum()) == 1
    assert a["x"].float().abs().amax() > 20        # outlier channels
    assert spec.make_inputs({"T": 1, "H": 64}, "fp32", seed=3)["x"].abs().sum() > 0


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["H"] % 2 for d in hold)


def test_occurrences(spec):
    # llama-3.1-70b-fp8 at TP4: o_proj input 64/4 heads x 128 = 2048, down input 28672/4 = 7168; 80 layers each
    assert sorted(spec.module.occurrences(MODELS["llama-3.1-70b-fp8"], 4, 16), key=str) == \
        [({"T": 16, "H": 2048}, 80), ({"T": 16, "H": 7168}, 80)]
    assert spec.module.occurrences(MODELS["llama-3.1-70b"], 8, 16) == []
    assert spec.module.occurrences(MODELS["deepseek-v3"], 8, 16) == []
