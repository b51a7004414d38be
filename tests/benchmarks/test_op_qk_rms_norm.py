"""qk_rms_norm operator folder: the reference by hand and against a per-head loop, inputs whose heads and weights
differ, the seed under the interpreter (odd head sizes, strided views of a fused QKV), what the tolerances catch
(one weight for both, a norm over all heads), and per-model calls."""
import math
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
    return load_operator("qk_rms_norm")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_qk_rms_norm_test")


def test_reference_by_hand(spec):
    q = torch.tensor([[[3.0, 4.0], [0.0, 2.0]]])           # two heads: rms sqrt(12.5) and sqrt(2)
    k = torch.tensor([[[1.0, 1.0]]])
    wq, wk = torch.tensor([2.0, 1.0]), torch.tensor([0.5, 3.0])
    q_out, k_out = spec.reference(q, k, wq, wk, eps=0.0)
    r = math.sqrt(12.5)
    torch.testing.assert_close(q_out, torch.tensor([[[6 / r, 4 / r], [0.0, 2 / math.sqrt(2)]]]))
    torch.testing.assert_close(k_out, torch.tensor([[[0.5, 3.0]]]))


def test_reference_is_a_loop_over_heads(spec):
    a = spec.make_inputs({"T": 3, "Hq": 4, "Hk": 2, "D": 16}, "fp32", seed=2)
    q_out, k_out = spec.reference(**a)
    for x, w, out in ((a["q"], a["wq"], q_out), (a["k"], a["wk"], k_out)):
        for t in range(x.shape[0]):
            for h in range(x.shape[1]):
                row = x[t, h].tolist()
                rms = math.sqrt(sum(v * v for v in row) / len(row) + a["eps"])
                expect = torch.tensor([v / rms * float(g) for v, g in zip(row, w)])
                torch.testing.assert_close(out[t, h], expect, rtol=1e-5, atol=1e-6)


def test_inputs_have_distinct_weights_and_head_scales(spec):
    a = spec.make_inputs({"T": 8, "Hq": 8, "Hk": 2, "D": 128}, "bf16", seed=3)
    assert a["q"].dtype == a["wq"].dtype == torch.bfloat16 and a["eps"] == 1e-6
    assert ((a["wq"].float() / a["wk"].float()).log().abs().mean()) > 0.2
    rms = a["q"].float().pow(2).mean(-1).sqrt().mean(0)                 # per head
    assert rms.max() / rms.min() > 2


def test_output_spec_and_work(spec):
    dims = {"T": 64, "Hq": 8, "Hk": 1, "D": 128}
    assert spec.module.output_spec(dims, "bf16") == (((64, 8, 128), "bf16"), ((64, 1, 128), "bf16"))
    W, Q = spec.module.work(dims, "bf16")
    assert W == {"fp32": 4 * 64 * 9 * 128} and Q == 2 * 64 * 9 * 128 * 2 + 2 * 128 * 2


@pytest.mark.interpreter
@pytest.mark.parametrize("T, Hq, Hk, D", [(3, 4, 1, 128), (5, 7, 3, 80), (2, 3, 2, 256), (1, 16, 1, 96)])
def test_seed_matches_reference(spec, seed, T, Hq, Hk, D):
    inputs = spec.make_inputs({"T": T, "Hq": Hq, "Hk": Hk, "D": D}, "fp32", seed=T + D)
    for out, ref in zip(seed.qk_rms_norm(**inputs), spec.reference(**inputs)):
        assert tolerance_failures(out, ref, spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_on_views_of_a_fused_qkv(spec, seed):
    a = spec.make_inputs({"T": 3, "Hq": 4, "Hk": 2, "D": 64}, "fp32", seed=6)
    qkv = torch.cat([a["q"], a["k"], a["k"]], dim=1)                     # [T, Hq + 2 Hk, D]
    q, k = qkv[:, :4], qkv[:, 4:6]
    assert not q.is_contiguous() and q.stride() == (8 * 64, 64, 1)
    outs = seed.qk_rms_norm(q, k, a["wq"], a["wk"], 1e-6)
    for out, ref in zip(outs, spec.reference(q, k, a["wq"], a["wk"], 1e-6)):
        assert out.is_contiguous() and tolerance_failures(out, ref, spec.tolerance("fp32")) == []


def test_one_weight_or_a_norm_over_all_heads_fails(spec):
    a = spec.make_inputs({"T": 16, "Hq": 8, "Hk": 2, "D": 128}, "bf16", seed=5)
    ref_q, ref_k = spec.reference(**a)
    tol = spec.tolerance("bf16")
    _, k_with_wq = spec.reference(a["q"], a["k"], a["wq"], a["wq"], a["eps"])
    assert tolerance_failures(k_with_wq, ref_k, tol)
    T, H, D = a["q"].shape
    flat, _ = spec.reference(a["q"].reshape(T, 1, H * D), a["k"], a["wq"].repeat(H), a["wk"], a["eps"])
    assert tolerance_failures(flat.reshape(T, H, D), ref_q, tol)


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(30):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["Hq"] > max(h["Hq"] for h in hot) for d in hold)


def test_occurrences(spec):
    occ = spec.module.occurrences
    assert occ(MODELS["qwen3-30b-a3b"], 1, 64) == [({"T": 64, "Hq": 32, "Hk": 4, "D": 128}, 48)]
    assert occ(MODELS["qwen3-235b-a22b"], 8, 1) == [({"T": 1, "Hq": 8, "Hk": 1, "D": 128}, 94)]
    assert occ(MODELS["qwen3-next-80b-a3b"], 2, 16) == [({"T": 16, "Hq": 8, "Hk": 1, "D": 256}, 12)]
    for other in ("llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b", "command-r7b"):
        assert occ(MODELS[other], 1, 64) == []


@pytest.mark.interpreter
def test_seed_passes_the_sandbox():
    res = evaluate_seed("qk_rms_norm")
    assert res.accepted, f"{res.verdict} at {res.failed_stage}: {res.reasons}"


@pytest.mark.interpreter
@pytest.mark.parametrize("fused, tokens, preload", [(1, 1, 0), (1, 2, 0), (1, 4, 0), (0, 1, 1)])
def test_seed_switches_match_reference(spec, seed, monkeypatch, fused, tokens, preload):
    """FUSED (TOKENS whole tokens of q and k per program) and PRELOAD_W, on odd head counts and sizes, a token
    count that TOKENS does not divide, the prefill table, and views of a fused QKV."""
    for table in ("by_block_d", "prefill_by_block_d"):
        monkeypatch.setitem(seed.CONFIGS, table, {key: dict(v, FUSED=fused, TOKENS=tokens, PRELOAD_W=preload)
                                                  for key, v in seed.CONFIGS[table].items()})
    for (T, Hq, Hk, D), decode_max_t in (((5, 7, 3, 80), 256), ((3, 4, 1, 128), 0), ((1, 16, 1, 96), 256)):
        monkeypatch.setitem(seed.CONFIGS, "decode_max_t", decode_max_t)
        inputs = spec.make_inputs({"T": T, "Hq": Hq, "Hk": Hk, "D": D}, "fp32", seed=T + D)
        for out, ref in zip(seed.qk_rms_norm(**inputs), spec.reference(**inputs)):
            assert tolerance_failures(out, ref, spec.tolerance("fp32")) == []
    a = spec.make_inputs({"T": 3, "Hq": 4, "Hk": 2, "D": 64}, "fp32", seed=6)
    qkv = torch.cat([a["q"], a["k"], a["k"]], dim=1)
    q, k = qkv[:, :4], qkv[:, 4:6]
    for out, ref in zip(seed.qk_rms_norm(q, k, a["wq"], a["wk"], 1e-6), spec.reference(q, k, a["wq"], a["wk"], 1e-6)):
        assert out.is_contiguous() and tolerance_failures(out, ref, spec.tolerance("fp32")) == []


def test_fused_prefill_kernel_issues_every_load_before_its_first_store(spec, seed):
    """The fused path normalizes q's heads and then k's. Written as load-normalize-store per tensor, k's load came
    after q's stores in the sm_90 PTX and waited for q's DRAM round trip; both tiles are now loaded first. At the
    prefill table's D = 128 entry, the hot heads (Hq 8, Hk 1), no spills either."""
    from hopper_compile import compile_for_hopper
    cfg = seed.CONFIGS["prefill_by_block_d"][128]
    ptrs = ("q_ptr", "k_ptr", "wq_ptr", "wk_ptr", "qo_ptr", "ko_ptr")
    types = {**{p: "*bf16" for p in ptrs}, "eps": "fp32"}
    strides = ("stride_qt", "stride_qh", "stride_kt", "stride_kh", "stride_qot", "stride_qoh", "stride_kot", "stride_koh")
    compiles = [{"kernel": "_qk_rms_norm_fused_kernel", "types": types, "aligned": list(ptrs) + list(strides) + ["D"],
                 "constexprs": dict(TOKENS=tokens, HEADS_Q=8, HEADS_K=1, BLOCK_D=128),
                 "num_warps": cfg["num_warps"], "num_stages": 1} for tokens in sorted({cfg["TOKENS"], 4})]
    for c, r in zip(compiles, compile_for_hopper(spec.seed_path, compiles)):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['constexprs']} spills: {r['usage']}"
        assert r["loads_before_stores"], f"{c['constexprs']}: a global load after a global store"
