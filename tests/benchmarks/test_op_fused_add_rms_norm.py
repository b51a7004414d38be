"""fused_add_rms_norm operator folder: work model by hand, the reference against torch's own rms_norm, the seed
under the interpreter (one pass, chunked, strided rows, the vLLM rounding switch) directly and through the
real sandbox, what the tolerances catch, hold-outs and per-model call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import call_failures, load_seed, seed_through_sandbox
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("fused_add_rms_norm")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_fused_add_rms_norm_test")


def test_contract_declares_two_outputs(spec):
    assert spec.output_names == ("out", "residual_out") and spec.mutates == ()
    assert spec.outputs({"T": 3, "H": 8}, "bf16") == [("out", (3, 8), "bf16"), ("residual_out", (3, 8), "bf16")]


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "H": 4096}, "bf16")
    assert W == {"fp32": 5 * 64 * 4096}
    # x, residual read and out, residual_out written (4 * 64 * 4096 * 2 B) + weight (4096 * 2 B)
    assert Q == 2_097_152 + 8192


def test_reference_against_torch_rms_norm(spec):
    inputs = spec.make_inputs({"T": 7, "H": 300}, "bf16", seed=2)
    out, residual_out = spec.reference(**inputs)
    s = inputs["x"] + inputs["residual"]                 # bf16 add: fp32 math, one rounding
    assert torch.equal(residual_out, s)
    expect = torch.nn.functional.rms_norm(s.float(), (300,), inputs["weight"].float(), eps=1e-6)
    torch.testing.assert_close(out.float(), expect, atol=2e-2, rtol=1e-2)


def test_residual_out_is_rounded_before_the_norm(spec):
    # 1 + 2^-9 rounds to 1 in bf16: the norm must see the rounded stream, as the next layer will
    x = torch.tensor([[1.0, 1.0]], dtype=torch.bfloat16)
    r = torch.tensor([[2.0 ** -9, 0.0]], dtype=torch.bfloat16)
    out, residual_out = spec.reference(x, r, torch.ones(2, dtype=torch.bfloat16), eps=0.0)
    assert residual_out.tolist() == [[1.0, 1.0]] and out.tolist() == [[1.0, 1.0]]


@pytest.mark.interpreter
@pytest.mark.parametrize("T, H", [(1, 128), (5, 37), (3, 200), (2, 1000)])
def test_seed_matches_reference(spec, seed, T, H):
    dims = {"T": T, "H": H}
    assert call_failures(spec, seed.fused_add_rms_norm, spec.make_inputs(dims, "fp32", seed=T + H), dims) == []


@pytest.mark.interpreter
def test_seed_chunked_strided_and_rounding_switch(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)
    a = spec.make_inputs({"T": 3, "H": 232}, "fp32", seed=5)
    inputs = {"x": a["x"][:, 8:208], "residual": a["residual"][:, :200], "weight": a["weight"][:200], "eps": 1e-6}
    assert inputs["x"].stride() == (232, 1)
    assert call_failures(spec, seed.fused_add_rms_norm, inputs, {"T": 3, "H": 200}) == []
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 8192)
    table = {k: dict(v, ROUND_NORMED=1) for k, v in seed.CONFIGS["decode_by_block_h"].items()}
    monkeypatch.setitem(seed.CONFIGS, "decode_by_block_h", table)
    b = spec.make_inputs({"T": 3, "H": 200}, "bf16", seed=6)
    assert call_failures(spec, seed.fused_add_rms_norm, b, {"T": 3, "H": 200}, "bf16") == []


@pytest.mark.interpreter
def test_seed_passes_the_sandbox(spec):
    """Lint, compile, correctness (both outputs compared), the read-only-inputs call and hold-outs."""
    res = seed_through_sandbox(spec)
    assert res.accepted, res.reasons
    assert any(s.holdout for s in res.shapes)


def test_normalizing_x_or_skipping_the_weight_fails(spec):
    inputs = spec.make_inputs({"T": 16, "H": 512}, "bf16", seed=1)
    x, w = inputs["x"].float(), inputs["weight"].float()
    s = (inputs["x"].float() + inputs["residual"].float())
    norm = lambda v: v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6)   # noqa: E731
    residual_out = s.to(torch.bfloat16)

    def fails(out):
        return call_failures(spec, lambda **kw: (out.to(torch.bfloat16), residual_out), inputs, {"T": 16, "H": 512},
                             "bf16")
    assert fails(norm(x) * w) and fails(norm(s)) and fails(norm(s) * w) == []
    assert call_failures(spec, spec.module.baseline, inputs, {"T": 16, "H": 512}, "bf16") == []


def test_inputs(spec):
    a = spec.make_inputs({"T": 64, "H": 1024}, "fp32", seed=3)
    assert set(a) == set(spec.arg_names)
    assert a["residual"].std() > 2 * a["x"].std()
    assert a["residual"].abs().max() > 100 and a["x"].abs().max() > 10
    assert 0.05 < a["weight"].std().item() < 0.15


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["H"] % 2 for d in hold) and all(d["T"] <= 1 << 16 for d in hold)


def test_occurrences(spec):
    # 32 layers: post-attention norm in each, input norm in layers 1..31, final norm = 64 over 4096, any tp
    assert spec.module.occurrences(MODELS["llama-3.1-8b"], 1, 64) == [({"T": 64, "H": 4096}, 64)]
    assert spec.module.occurrences(MODELS["deepseek-v3"], 8, 16) == [({"T": 16, "H": 7168}, 122)]
    assert spec.module.occurrences(MODELS["command-r7b"], 1, 16) == []


@pytest.mark.interpreter
def test_seed_preload_switch(spec, seed, monkeypatch):
    """PRELOAD_W=1 in both tables: one chunk (odd H), the prefill table, and the chunked path (where it is off)."""
    for table in ("by_block_h", "decode_by_block_h"):
        monkeypatch.setitem(seed.CONFIGS, table, {k: dict(v, PRELOAD_W=1) for k, v in seed.CONFIGS[table].items()})
    for (T, H), decode_max_t in (((5, 37), 256), ((3, 200), 0), ((2, 1000), 256)):
        monkeypatch.setitem(seed.CONFIGS, "decode_max_t", decode_max_t)
        dims = {"T": T, "H": H}
        assert call_failures(spec, seed.fused_add_rms_norm, spec.make_inputs(dims, "fp32", seed=T + H), dims) == []
    monkeypatch.setitem(seed.CONFIGS, "max_block_h", 64)
    dims = {"T": 3, "H": 200}
    assert call_failures(spec, seed.fused_add_rms_norm, spec.make_inputs(dims, "fp32", seed=7), dims) == []
