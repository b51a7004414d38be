"""moe_topk_softmax operator folder: the tie rule and renormalization by hand and against a Python loop, inputs on
the 1/16 grid with ties at the cut, the seed under the interpreter (both renormalize settings, odd expert counts),
what the exact ids catch (unsorted, ties toward the higher id), and per-model calls."""
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
    return load_operator("moe_topk_softmax")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_moe_topk_softmax_test")


def test_ties_go_to_the_lower_id_and_renormalize(spec):
    x = torch.tensor([[1.0, 3.0, 2.0, 3.0, 2.0]])
    w, ids = spec.reference(x, 3, True)
    assert ids.tolist() == [[1, 3, 2]] and ids.dtype == torch.int32     # 3 at ids 1, 3; the cut's tie: 2 before 4
    e = [math.exp(v) for v in (3.0, 3.0, 2.0)]
    torch.testing.assert_close(w, torch.tensor([[v / sum(e) for v in e]]))
    w, _ = spec.reference(x, 3, False)
    z = sum(math.exp(v) for v in x[0].tolist())
    torch.testing.assert_close(w, torch.tensor([[v / z for v in e]]))


def test_reference_is_a_python_loop(spec):
    a = spec.make_inputs({"T": 12, "E": 60, "k": 6}, "bf16", seed=4)
    w, ids = spec.reference(**a)
    for t, row in enumerate(a["logits"].float().tolist()):
        order = sorted(range(len(row)), key=lambda e: (-row[e], e))[:6]
        assert ids[t].tolist() == order
        sel = [math.exp(row[e]) for e in order]
        torch.testing.assert_close(w[t], torch.tensor([v / sum(sel) for v in sel]))


def test_inputs_are_on_the_grid_with_ties_at_the_cut(spec):
    a = spec.make_inputs({"T": 30, "E": 128, "k": 8}, "bf16", seed=3)
    x = a["logits"].float()
    assert a["logits"].dtype == torch.bfloat16 and a["k"] == 8 and a["renormalize"] is True
    assert torch.equal(x * 16, (x * 16).round())
    desc = x.sort(-1, descending=True).values
    assert (desc[:, 7] == desc[:, 8]).sum() >= 10                     # every third row at least
    gaps = (desc[:, :9, None] - desc[:, None, :9]).abs()
    assert ((gaps == 0) | (gaps >= 1 / 16)).all()                     # no near-ties anywhere near the cut
    for T in (1, 2):                          # decode batches of one or two tokens still get a tie at the cut
        for s in range(8):
            lone = spec.make_inputs({"T": T, "E": 64, "k": 6}, "bf16", seed=s)["logits"].float()
            assert lone.shape == (T, 64)
            d = lone.sort(-1, descending=True).values
            assert (d[:, 5] == d[:, 6]).any(), f"T={T} seed {s}: no row ties at the top-k cut"


def test_output_spec_and_work(spec):
    dims = {"T": 64, "E": 128, "k": 8}
    assert spec.module.output_spec(dims, "bf16") == (((64, 8), "fp32"), ((64, 8), "int32"))
    W, Q = spec.module.work(dims, "bf16")
    assert W == {"fp32": 5 * 64 * 128} and Q == 64 * 128 * 2 + 8 * 64 * 8


@pytest.mark.interpreter
@pytest.mark.parametrize("renormalize", [True, False])
@pytest.mark.parametrize("T, E, k", [(13, 128, 8), (5, 60, 5), (70, 8, 2), (3, 512, 10), (1, 7, 7)])
def test_seed_matches_reference(spec, seed, T, E, k, renormalize):
    inputs = spec.make_inputs({"T": T, "E": E, "k": k}, "fp32", seed=T + E)
    inputs["renormalize"] = renormalize
    (w, ids), (rw, rids) = seed.moe_topk_softmax(**inputs), spec.reference(**inputs)
    assert ids.dtype == torch.int32 and torch.equal(ids, rids)
    assert tolerance_failures(w, rw, spec.tolerance("fp32")) == []


def test_unsorted_or_higher_id_ties_change_the_ids(spec):
    a = spec.make_inputs({"T": 30, "E": 128, "k": 8}, "bf16", seed=7)
    _, ids = spec.reference(**a)
    assert not torch.equal(ids.sort(dim=-1).values, ids)               # id order is not the output order
    flipped = a["logits"].flip(-1)                                     # ties toward the higher id instead
    _, ids_hi = spec.reference(flipped, 8, True)
    assert not torch.equal((127 - ids_hi.long()).int(), ids)


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(30):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["E"] > max(h["E"] for h in hot) for d in hold)
        assert all(1 <= d["k"] <= d["E"] for d in hold)


def test_occurrences(spec):
    occ = spec.module.occurrences
    assert occ(MODELS["qwen3-235b-a22b"], 8, 64) == [({"T": 64, "E": 128, "k": 8}, 94)]
    assert occ(MODELS["qwen3-next-80b-a3b"], 2, 1) == [({"T": 1, "E": 512, "k": 10}, 48)]
    assert occ(MODELS["mixtral-8x7b"], 2, 16) == [({"T": 16, "E": 8, "k": 2}, 32)]
    assert occ(MODELS["gpt-oss-120b"], 1, 16) == [({"T": 16, "E": 128, "k": 4}, 36)]
    for other in ("deepseek-v3", "llama-3.1-8b", "command-r7b"):      # sigmoid router, dense models
        assert occ(MODELS[other], 8, 64) == []


@pytest.mark.interpreter
def test_seed_passes_the_sandbox():
    res = evaluate_seed("moe_topk_softmax")
    assert res.accepted, f"{res.verdict} at {res.failed_stage}: {res.reasons}"


@pytest.mark.interpreter
@pytest.mark.parametrize("select", [1, 2, 3])
@pytest.mark.parametrize("renormalize", [True, False])
def test_seed_select_switch(spec, seed, monkeypatch, select, renormalize):
    """SELECT=1 (weight from the round's maximum), 2 (one packed-key reduction a round) and 3 (a bitonic top-k of
    the packed keys): the same ids (ties to the lower id, the seeded tie at the cut) and weights, also with
    -0.0/+0.0, -inf and negative rows."""
    monkeypatch.setitem(seed.CONFIGS, "by_block_e", {k: dict(v, SELECT=select)
                                                     for k, v in seed.CONFIGS["by_block_e"].items()})
    for T, E, k in ((13, 128, 8), (5, 60, 5), (1, 7, 7), (3, 512, 10)):
        inputs = spec.make_inputs({"T": T, "E": E, "k": k}, "fp32", seed=T + E)
        inputs["renormalize"] = renormalize
        (w, ids), (rw, rids) = seed.moe_topk_softmax(**inputs), spec.reference(**inputs)
        assert torch.equal(ids, rids) and tolerance_failures(w, rw, spec.tolerance("fp32")) == []
    x = torch.tensor([[-0.0, 0.0, -1.0, float("-inf"), -0.0, -3.0],
                      [-5.0, -2.0, -2.0, -7.0, -1.0, float("-inf")]])
    (w, ids), (rw, rids) = seed.moe_topk_softmax(x, 4, renormalize), spec.reference(x, 4, renormalize)
    assert ids.tolist() == rids.tolist() == [[0, 1, 4, 2], [4, 1, 2, 0]]
    assert tolerance_failures(w, rw, spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("renormalize", [True, False])
def test_key32_on_bf16_logits(spec, seed, monkeypatch, renormalize):
    """SELECT=3 with int32 keys (bf16 logits): the ids of the int64 keys exactly (ties to the lower id, -0.0/+0.0,
    -inf, negative rows) and the same weights; fp32 logits keep the int64 keys."""
    monkeypatch.setitem(seed.CONFIGS, "by_block_e", {k: dict(v, SELECT=3) for k, v in seed.CONFIGS["by_block_e"].items()})
    rows = [[-0.0, 0.0, -1.0, float("-inf"), -0.0, -3.0, 2.5, 2.5], [-5.0, -2.0, -2.0, -7.0, -1.0, float("-inf"), -1.0, -9.0]]
    cases = [spec.make_inputs({"T": T, "E": E, "k": k}, "bf16", seed=T + E) for T, E, k in ((13, 128, 8), (5, 60, 5))]
    cases.append({"logits": torch.tensor(rows, dtype=torch.bfloat16), "k": 5})
    for inputs in cases:
        inputs["renormalize"] = renormalize
        monkeypatch.setitem(seed.CONFIGS, "key32", 0)
        w64, ids64 = seed.moe_topk_softmax(**inputs)
        monkeypatch.setitem(seed.CONFIGS, "key32", 1)
        w32, ids32 = seed.moe_topk_softmax(**inputs)
        rw, rids = spec.reference(**inputs)
        assert torch.equal(ids32, ids64) and torch.equal(ids32, rids.to(ids32.dtype))
        assert tolerance_failures(w32, rw, spec.tolerance("bf16")) == []
        torch.testing.assert_close(w32, w64, rtol=1e-6, atol=1e-7)
    # fp32 logits that differ below bf16's precision: int32 keys would tie them, the int64 ones order them
    close = torch.tensor([[1.0, 1.0 + 2.0 ** -20, 0.5]])
    assert seed.moe_topk_softmax(close, 1, renormalize)[1].tolist() == [[1]]


@pytest.mark.interpreter
def test_many_tokens_take_the_large_t_entry(spec, seed, monkeypatch):
    """From large_t_min tokens on, an entry of large_t_by_block_e replaces the one of the same key (at T = 4096 the
    bitonic top-k lost to k rounds); a key it lacks falls back to by_block_e. Both sides of the bound agree with
    the reference."""
    monkeypatch.setitem(seed.CONFIGS, "large_t_min", 8)
    small, large = seed.CONFIGS["by_block_e"][128], seed.CONFIGS["large_t_by_block_e"][128]
    assert small != large
    assert seed._config(7, 128) == small and seed._config(8, 128) == large
    assert seed._config(8, 512) == seed.CONFIGS["by_block_e"][512]
    for T in (5, 13):
        inputs = spec.make_inputs({"T": T, "E": 128, "k": 8}, "fp32", seed=T)
        (w, ids), (rw, rids) = seed.moe_topk_softmax(**inputs), spec.reference(**inputs)
        assert torch.equal(ids, rids) and tolerance_failures(w, rw, spec.tolerance("fp32")) == []
