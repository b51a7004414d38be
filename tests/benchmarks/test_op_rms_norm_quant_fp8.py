"""rms_norm_quant_fp8 operator folder: work model by hand, the formula (fp32 norm, then per-token fp8), the seed
under the interpreter (one pass, chunked, strided), what the check rejects, hold-outs and call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import load_seed
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("rms_norm_quant_fp8")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_rms_norm_quant_fp8_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "H": 8192}, "bf16")
    assert W == {"fp32": 6 * 64 * 8192}
    # x 1,048,576 B; weight 16,384 B; xq 524,288 B; scales 256 B
    assert Q == 1_048_576 + 16_384 + 524_288 + 256


def test_reference_is_the_formula(spec):
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    w = torch.tensor([2.0, 0.5])
    xq, scale = spec.reference(x, w, eps=0.0 + 1e-30)
    # rms = sqrt(12.5); y = [6, 2] / sqrt(12.5); amax = 6 / sqrt(12.5); y / scale = [448, 149.3 -> 144]
    assert scale[0].item() == pytest.approx(6 / 12.5 ** 0.5 / 448, rel=1e-6)
    assert xq[0].float().tolist() == [448.0, 144.0]
    assert scale[1].item() == pytest.approx(1 / (448 * 512), rel=1e-7) and xq[1].float().abs().sum() == 0


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", [(1, 128), (5, 37), (3, 200), (2, 1000)])
def test_seed_matches_reference(spec, seed, T, H):
    inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T + H)
    assert spec.module.check(inputs, seed.rms_norm_quant_fp8(**inputs), spec.reference(**inputs)) is None


@pytest.mark.interpreter
def test_seed_chunked_and_strided(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)
    a = spec.make_inputs({"T": 3, "H": 232}, "fp32", seed=5)
    x, w = a["x"][:, 8:208], a["weight"][:200]
    got = seed.rms_norm_quant_fp8(x, w, 1e-6)
    assert spec.module.check({"x": x, "weight": w, "eps": 1e-6}, got, spec.reference(x, w, 1e-6)) is None


def test_check_rejects_a_bf16_norm_and_a_skipped_weight(spec):
    inputs = spec.make_inputs({"T": 16, "H": 4096}, "bf16", seed=1)
    ref = spec.reference(**inputs)
    assert spec.module.check(inputs, spec.module.baseline(**inputs), ref) is None
    x, w = inputs["x"].float(), inputs["weight"].float()
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def quant(y):
        s = (y.abs().amax(-1, keepdim=True) / 448).clamp_min(1 / (448 * 512))
        return (y / s).clamp(-448, 448).to(torch.float8_e4m3fn), s.reshape(-1)
    bf16_norm = quant(((x * rstd).to(torch.bfloat16) * inputs["weight"]).float())
    no_weight = quant(x * rstd)
    for bad in (bf16_norm, no_weight):
        assert "scale" in spec.module.check(inputs, bad, ref)


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["H"] % 2 for d in hold)


def test_occurrences(spec):
    assert spec.module.occurrences(MODELS["llama-3.1-70b-fp8"], 4, 64) == [({"T": 64, "H": 8192}, 1)]
    assert spec.module.occurrences(MODELS["llama-3.1-70b"], 8, 64) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", [(2, 2048), (3, 4096)])
def test_unmasked_rows_match_the_masked_path(spec, seed, monkeypatch, T, H):
    """EVEN (one row a program, H a power of two: loads and stores without masks) against the reference, and bit
    for bit against the masked path (the same arithmetic); a row of 3000 stays masked and is right too."""
    assert seed._config(H)["ROWS"] == 1 and seed.CONFIGS["even"] == 1
    inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T * H)
    even = seed.rms_norm_quant_fp8(**inputs)
    assert spec.module.check(inputs, even, spec.reference(**inputs)) is None
    monkeypatch.setitem(seed.CONFIGS, "even", 0)
    masked = seed.rms_norm_quant_fp8(**inputs)
    assert torch.equal(even[0].view(torch.uint8), masked[0].view(torch.uint8)) and torch.equal(even[1], masked[1])
    monkeypatch.setitem(seed.CONFIGS, "even", 1)
    odd = spec.make_inputs({"T": 2, "H": 3000}, "fp32", seed=3)
    assert spec.module.check(odd, seed.rms_norm_quant_fp8(**odd), spec.reference(**odd)) is None
