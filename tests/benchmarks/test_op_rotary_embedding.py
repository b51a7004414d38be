"""rotary_embedding operator folder: the reference against complex multiplication (both pairings), inputs whose
positions are not the token index, the seed under the interpreter (neox and interleaved, odd head sizes, strided
rows), what the tolerances catch, and per-model calls."""
import random
from pathlib import Path

import pytest
from op_helpers import load_seed, tolerance_failures
from sandbox_seed import evaluate_seed
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("rotary_embedding")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_rotary_embedding_test")


def _by_complex(x, positions, cache, neox):
    """An independent formulation: each channel pair is a complex number multiplied by cos + i sin."""
    T, D = x.shape[0], cache.shape[1]
    h = x.double().reshape(T, -1, D)
    re, im = (h[..., :D // 2], h[..., D // 2:]) if neox else (h[..., 0::2], h[..., 1::2])
    rows = cache.double()[positions]
    rot = torch.complex(rows[:, None, :D // 2], rows[:, None, D // 2:])
    z = torch.complex(re, im) * rot
    out = torch.cat([z.real, z.imag], -1) if neox else torch.stack([z.real, z.imag], -1).flatten(-2)
    return out.reshape(T, -1).to(x.dtype)


@pytest.mark.parametrize("neox", [True, False])
def test_reference_is_a_complex_rotation(spec, neox):
    inputs = spec.make_inputs({"T": 5, "Hq": 3, "Hk": 2, "D": 8}, "fp32", seed=4)
    inputs["neox"] = neox
    q_out, k_out = spec.reference(**inputs)
    pos, cache = inputs["positions"], inputs["cos_sin_cache"]
    torch.testing.assert_close(q_out, _by_complex(inputs["q"], pos, cache, neox), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k_out, _by_complex(inputs["k"], pos, cache, neox), rtol=1e-6, atol=1e-6)


def test_reference_by_hand(spec):
    # D=4, one head: pairs (x0, x2) and (x1, x3) for neox, (x0, x1) and (x2, x3) interleaved; row 1 rotates
    # the first pair by 90 degrees (cos 0, sin 1) and leaves the second (cos 1, sin 0).
    cache = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    pos = torch.tensor([1])
    q, _ = spec.reference(x, x, pos, cache, neox=True)
    assert q.tolist() == [[-3.0, 2.0, 1.0, 4.0]]
    q, _ = spec.reference(x, x, pos, cache, neox=False)
    assert q.tolist() == [[-2.0, 1.0, 3.0, 4.0]]


def test_inputs(spec):
    for T in (64, 3000):
        a = spec.make_inputs({"T": T, "Hq": 2, "Hk": 1, "D": 64}, "bf16", seed=3)
        pos, cache = a["positions"], a["cos_sin_cache"]
        assert pos.dtype == torch.int64 and cache.dtype == torch.float32 and a["neox"] is True
        assert a["q"].shape == (T, 128) and a["k"].shape == (T, 64) and a["q"].dtype == torch.bfloat16
        assert 0 <= int(pos.min()) and int(pos.max()) < cache.shape[0]
        assert (pos != torch.arange(T)).float().mean() > 0.9, "positions must not be the token index"
    steps = torch.diff(a["positions"])
    assert (steps == 1).float().mean() > 0.99 and (steps != 1).any()   # prefill: runs of consecutive positions
    caches = {tuple(spec.make_inputs({"T": 1, "Hq": 1, "Hk": 1, "D": 64}, "fp32", seed=s)["cos_sin_cache"][7, :2].tolist())
              for s in range(12)}
    assert len(caches) > 2, "the cache (theta, scale) must vary by seed"


def test_output_spec_and_work(spec):
    dims = {"T": 64, "Hq": 8, "Hk": 1, "D": 128}
    assert spec.module.output_spec(dims, "bf16") == (((64, 1024), "bf16"), ((64, 128), "bf16"))
    W, Q = spec.module.work(dims, "bf16")
    assert W == {"fp32": 3 * 64 * 9 * 128}
    assert Q == 2 * 64 * 9 * 128 * 2 + 8 * 64 + 4 * 64 * 128


@pytest.mark.interpreter
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("T, Hq, Hk, D", [(3, 4, 2, 128), (5, 7, 3, 80), (1, 3, 1, 64), (300, 2, 1, 64)])
def test_seed_matches_reference(spec, seed, T, Hq, Hk, D, neox):
    inputs = spec.make_inputs({"T": T, "Hq": Hq, "Hk": Hk, "D": D}, "fp32", seed=T + D)
    inputs["neox"] = neox
    for out, ref in zip(seed.rotary_embedding(**inputs), spec.reference(**inputs)):
        assert tolerance_failures(out, ref, spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_on_strided_rows_of_a_fused_qkv(spec, seed):
    a = spec.make_inputs({"T": 3, "Hq": 4, "Hk": 2, "D": 64}, "fp32", seed=9)
    qkv = torch.randn(3, (4 + 2 * 2) * 64)
    q, k = qkv[:, :256], qkv[:, 256:384]
    assert q.stride() == (512, 1)
    outs = seed.rotary_embedding(q, k, a["positions"], a["cos_sin_cache"], True)
    for out, ref in zip(outs, spec.reference(q, k, a["positions"], a["cos_sin_cache"], True)):
        assert out.is_contiguous() and tolerance_failures(out, ref, spec.tolerance("fp32")) == []


def test_wrong_positions_pairing_or_shared_rows_fail(spec):
    a = spec.make_inputs({"T": 64, "Hq": 4, "Hk": 2, "D": 128}, "bf16", seed=2)
    ref_q, ref_k = spec.reference(**a)
    tol = spec.tolerance("bf16")
    by_index = spec.reference(a["q"], a["k"], torch.arange(64), a["cos_sin_cache"], True)
    interleaved = spec.reference(a["q"], a["k"], a["positions"], a["cos_sin_cache"], False)
    for wrong in (by_index, interleaved):
        assert tolerance_failures(wrong[0], ref_q, tol) and tolerance_failures(wrong[1], ref_k, tol)
    assert tolerance_failures(a["q"], ref_q, tol)                      # not rotating at all


def test_liger_inputs_leave_the_operator_inputs_alone(spec):
    a = spec.make_inputs({"T": 3, "Hq": 2, "Hk": 1, "D": 8}, "fp32", seed=1)
    li = spec.module.baseline_liger_inputs(**a)
    assert li["q"].shape == (1, 2, 3, 8) and li["cos"].shape == (1, 3, 4)
    assert li["q"].data_ptr() != a["q"].data_ptr()
    with pytest.raises(ValueError, match="neox"):
        spec.module.baseline_liger_inputs(**{**a, "neox": False})


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(30):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["D"] in (80, 96) for d in hold) and all(d["D"] % 2 == 0 for d in hold)


def test_occurrences(spec):
    occ = spec.module.occurrences
    assert occ(MODELS["llama-3.1-70b"], 8, 64) == [({"T": 64, "Hq": 8, "Hk": 1, "D": 128}, 80)]
    assert occ(MODELS["qwen3-235b-a22b"], 8, 16) == [({"T": 16, "Hq": 8, "Hk": 1, "D": 128}, 94)]
    assert occ(MODELS["gpt-oss-120b"], 1, 1) == [({"T": 1, "Hq": 64, "Hk": 8, "D": 64}, 36)]
    assert occ(MODELS["mixtral-8x7b"], 2, 4096) == [({"T": 4096, "Hq": 16, "Hk": 4, "D": 128}, 32)]
    for other in ("deepseek-v3", "command-r7b", "qwen3-next-80b-a3b"):   # interleaved or partial rotary
        assert occ(MODELS[other], 2, 64) == []
    odd = {"num_attention_heads": 12, "num_key_value_heads": 4, "head_dim": 64, "num_hidden_layers": 2}
    assert occ(odd, 4, 1) == [({"T": 1, "Hq": 3, "Hk": 1, "D": 64}, 2)]
    with pytest.raises(ValueError, match="num_key_value_heads=4"):      # 6 GPUs cannot share 4 KV heads evenly
        occ(odd, 6, 1)


@pytest.mark.interpreter
def test_seed_passes_the_sandbox():
    res = evaluate_seed("rotary_embedding")
    assert res.accepted, f"{res.verdict} at {res.failed_stage}: {res.reasons}"
