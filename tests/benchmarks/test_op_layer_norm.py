"""layer_norm operator folder: work model by hand, the formula (biased variance of centred values), inputs
whose rows have a mean (so RMSNorm fails), the seed under the interpreter (one pass, three passes,
strides), and per-model call counts (and that rms_norm no longer counts LayerNorm models)."""
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
    return load_operator("layer_norm")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_layer_norm_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "H": 4096}, "bf16")
    assert W == {"fp32": 7 * 64 * 4096}
    assert Q == 2 * 64 * 4096 * 2 + 2 * 4096 * 2 == 1_064_960


def test_reference_is_the_formula(spec):
    x = torch.tensor([[1.0, 3.0], [2.0, 2.0]])
    w = torch.tensor([2.0, 1.0])
    b = torch.tensor([0.5, -0.5])
    # row 0: mean 2, var 1 -> [-1, 1] * w + b = [-1.5, 0.5]; row 1: var 0 -> 0 / sqrt(eps) = 0 -> b
    expect = torch.tensor([[-1.5, 0.5], [0.5, -0.5]])
    torch.testing.assert_close(spec.reference(x, w, b, eps=0.0 + 1e-12), expect, atol=1e-5, rtol=0)


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", [(1, 256), (3, 200), (5, 37), (2, 4096)])
def test_seed_matches_reference(spec, seed, T, H):
    inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T + H)
    assert tolerance_failures(seed.layer_norm(**inputs), spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_three_pass_path_and_strides(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)
    a = spec.make_inputs({"T": 3, "H": 232}, "fp32", seed=6)
    x, w, b = a["x"][:, 16:216], a["weight"][:200], a["bias"][:200]
    out = seed.layer_norm(x, w, b, 1e-5)
    assert tolerance_failures(out, spec.reference(x, w, b, 1e-5), spec.tolerance("fp32")) == []


def test_rms_norm_or_no_bias_fails(spec):
    inputs = spec.make_inputs({"T": 64, "H": 1024}, "bf16", seed=2)
    x, w, b = inputs["x"].float(), inputs["weight"].float(), inputs["bias"].float()
    ref = spec.reference(**inputs)
    tol = spec.tolerance("bf16")
    rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w + b
    no_bias = spec.reference(inputs["x"], inputs["weight"], torch.zeros_like(inputs["bias"])).float()
    for bad in (rms, no_bias):
        assert tolerance_failures(bad.to(torch.bfloat16), ref, tol)
    assert tolerance_failures(spec.module.baseline(**inputs), ref, tol) == []
    assert inputs["x"].float().mean(-1).abs().mean() > 0.1          # rows have a mean


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["H"] % 2 and d["H"] > 4096 for d in hold)


def test_occurrences(spec):
    # Command R7B: 32 parallel blocks, one LayerNorm each, plus the final norm = 33, H 4096, any tp
    assert spec.module.occurrences(MODELS["command-r7b"], 1, 64) == [({"T": 64, "H": 4096}, 33)]
    assert spec.module.occurrences(MODELS["llama-3.1-8b"], 1, 64) == []
    assert load_operator("rms_norm").module.occurrences(MODELS["command-r7b"], 1, 64) == []
    assert math.isclose(MODELS["command-r7b"]["layer_norm_eps"], spec.module.DEFAULT_EPS)


def _switched(seed, **values):
    """CONFIGS with every entry of both tables (decode and prefill) set to these switch values."""
    cfg = dict(seed.CONFIGS)
    for table in ("by_block_h", "decode_by_block_h"):
        cfg[table] = {k: dict(v, **values) for k, v in seed.CONFIGS[table].items()}
    return cfg


@pytest.mark.interpreter
@pytest.mark.parametrize("preload, rsqrt, chan", [(1, 0, 0), (0, 1, 8), (1, 1, 4)])
def test_seed_switches_match_reference(spec, seed, monkeypatch, preload, rsqrt, chan):
    """PRELOAD_WB, RSQRT and CHAN (the statistics merged from per-thread groups; rows of 37 and 200 leave groups
    partly and wholly masked) on the one-pass path (decode and prefill tables) and the three-pass path."""
    monkeypatch.setattr(seed, "CONFIGS", _switched(seed, PRELOAD_WB=preload, RSQRT=rsqrt, CHAN=chan))
    for T, H, decode_max_t in ((3, 200, 256), (5, 37, 0), (2, 4096, 256)):
        monkeypatch.setitem(seed.CONFIGS, "decode_max_t", decode_max_t)
        inputs = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T + H)
        assert tolerance_failures(seed.layer_norm(**inputs), spec.reference(**inputs), spec.tolerance("fp32")) == []
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)
    a = spec.make_inputs({"T": 3, "H": 232}, "fp32", seed=6)
    x, w, b = a["x"][:, 16:216], a["weight"][:200], a["bias"][:200]
    assert tolerance_failures(seed.layer_norm(x, w, b, 1e-5), spec.reference(x, w, b, 1e-5),
                              spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H, decode_max_t", [(3, 200, 256), (5, 37, 0), (2, 4096, 256)])
def test_seed_shifted_statistics_match_reference(spec, seed, monkeypatch, T, H, decode_max_t):
    """SHIFT (sum and sum of squares about the row's first element, one reduction) on fp16 rows: as generated,
    with an outlier first element (K far from the mean), and with a mean 300x the spread, where unshifted
    E[x^2] - mean^2 cancels to noise in fp32. fp32 rows with SHIFT set (which they ignore) and an outlier first
    element still meet the fp32 tolerance."""
    monkeypatch.setattr(seed, "CONFIGS", _switched(seed, SHIFT=1, PRELOAD_WB=1, RSQRT=1))
    monkeypatch.setitem(seed.CONFIGS, "decode_max_t", decode_max_t)
    inputs = spec.make_inputs({"T": T, "H": H}, "fp16", seed=T + H)
    rows = [inputs["x"]]
    outlier = inputs["x"].clone()
    outlier[:, 0] = 100.0
    rows.append(outlier)
    rows.append((300.0 + inputs["x"].float()).half())
    for x in rows:
        a = dict(inputs, x=x)
        assert tolerance_failures(seed.layer_norm(**a), spec.reference(**a), spec.tolerance("fp16")) == []
    a = spec.make_inputs({"T": T, "H": H}, "fp32", seed=T + H)
    a["x"][:, 0] = 100.0
    assert tolerance_failures(seed.layer_norm(**a), spec.reference(**a), spec.tolerance("fp32")) == []


def test_small_decode_calls_take_their_own_warps(seed, monkeypatch):
    """Up to decode_small_t rows a decode entry runs on small_t_num_warps; above it, and on the prefill table, on
    num_warps (4096-wide rows: 16 warps at T = 16-64, 8 at T = 256 and at prefill)."""
    small = seed.CONFIGS["decode_small_t"]
    assert seed._config(1, 4096)["num_warps"] == seed._config(small, 4096)["num_warps"] == 16
    assert seed._config(small + 1, 4096)["num_warps"] == seed._config(256, 4096)["num_warps"] == 8
    assert seed._config(4096, 4096)["num_warps"] == 8 and "small_t_num_warps" not in seed._config(4096, 4096)
    monkeypatch.setitem(seed.CONFIGS, "decode_small_t", 0)
    assert seed._config(16, 4096)["num_warps"] == 8


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype, shift, preload", [("fp16", 1, 1), ("fp16", 0, 0), ("fp32", 1, 1)])
def test_unmasked_rows_match_the_masked_path(spec, seed, monkeypatch, dtype, shift, preload):
    """EVEN (one row a program, H a power of two: no masks) against the reference and the masked path, with the
    shifted and the centred statistics, weight and bias loaded first or last; H = 2048 and 4096 take it, 3000
    (not BLOCK_H) and CHAN's groups do not."""
    monkeypatch.setattr(seed, "CONFIGS", _switched(seed, SHIFT=shift, PRELOAD_WB=preload))
    for T, H in ((2, 4096), (3, 2048), (1, 3000)):
        cfg = seed._config(T, seed.triton.next_power_of_2(H))
        assert seed._even(cfg, H, seed.triton.next_power_of_2(H)) == int(H in (2048, 4096))
        inputs = spec.make_inputs({"T": T, "H": H}, dtype, seed=T * H)
        even = seed.layer_norm(**inputs)
        assert tolerance_failures(even, spec.reference(**inputs), spec.tolerance(dtype)) == []
        monkeypatch.setitem(seed.CONFIGS, "even", 0)
        assert torch.equal(seed.layer_norm(**inputs), even)              # the same arithmetic, masks aside
        monkeypatch.setitem(seed.CONFIGS, "even", 1)
    assert seed._even(dict(seed._config(2, 4096), CHAN=8), 4096, 4096) == 0
