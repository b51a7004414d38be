"""reshape_and_cache operator folder: the contract's in-place form, the slot mapping's realism (distinct slots,
padding, null block), the reference against a per-token loop, the seed under the interpreter directly and
through the real sandbox, what the exact comparison catches, hold-outs and per-model call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import call_failures, load_seed, seed_through_sandbox
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())
DIMS = {"T": 40, "S": 3, "Hk": 2, "D": 24, "BS": 16}


@pytest.fixture(scope="module")
def spec():
    return load_operator("reshape_and_cache")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_reshape_and_cache_test")


def test_contract_is_in_place(spec):
    assert spec.output_names == () and spec.mutates == ("key_cache", "value_cache")
    assert spec.outputs(DIMS, "bf16") == []


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "S": 64, "Hk": 8, "D": 128, "BS": 16}, "bf16")
    # key, value read + their slots written in two caches: 4 * 64 * 1024 * 2 B; slot_mapping 64 * 8 B
    assert Q == 524_288 + 512 and W == {"fp32": 2 * 64 * 1024}


def test_slot_mapping_is_realistic(spec):
    for seed in range(10):
        a = spec.make_inputs(DIMS, "fp32", seed=seed)
        sm = a["slot_mapping"]
        real = sm[sm >= 0]
        assert sm.dtype == torch.int64 and len(set(real.tolist())) == real.numel()     # distinct slots
        assert (sm[-spec.module.padding(40):] == -1).all() and real.numel() == 40 - spec.module.padding(40)
        assert (real >= 16).all(), "block 0 is the null block, never mapped"
        assert int(real.max()) < a["key_cache"].shape[0] * 16
        # sequences append in order: consecutive tokens mostly take consecutive slots
        assert int((real[1:] - real[:-1] == 1).sum()) >= real.numel() - 3 * DIMS["S"]
    assert a["key"].stride(0) == 4 * 2 * 24 and a["key_cache"].abs().sum() > 0


def test_reference_is_a_per_token_copy(spec):
    a = spec.make_inputs(DIMS, "fp32", seed=4)
    kc, vc = a["key_cache"].clone(), a["value_cache"].clone()
    for t, slot in enumerate(a["slot_mapping"].tolist()):
        if slot >= 0:
            kc[slot // 16, slot % 16] = a["key"][t]
            vc[slot // 16, slot % 16] = a["value"][t]
    clones = {"key_cache": a["key_cache"].clone(), "value_cache": a["value_cache"].clone()}
    assert spec.reference(**{**a, **clones}) is None
    assert torch.equal(clones["key_cache"], kc) and torch.equal(clones["value_cache"], vc)


@pytest.mark.interpreter
@pytest.mark.parametrize("dims", [DIMS, {"T": 1, "S": 1, "Hk": 1, "D": 64, "BS": 16},
                                  {"T": 7, "S": 7, "Hk": 3, "D": 45, "BS": 16},
                                  {"T": 33, "S": 1, "Hk": 8, "D": 128, "BS": 16}], ids=str)
def test_seed_matches_reference(spec, seed, dims):
    for dtype in ("fp32", "bf16"):     # a copy: bf16 loads and stores are exact under the interpreter too
        assert call_failures(spec, seed.reshape_and_cache, spec.make_inputs(dims, dtype, seed=5), dims, dtype) == []


@pytest.mark.interpreter
def test_seed_passes_the_sandbox(spec):
    """Lint, compile, correctness (both caches compared whole), the read-only-inputs call and hold-outs."""
    res = seed_through_sandbox(spec)
    assert res.accepted, res.reasons
    assert any(s.holdout for s in res.shapes)


def test_seed_issues_every_load_before_its_first_store_on_hopper(spec, seed):
    """A program copies TOKENS rows. Masked by the slot and walked token by token, the rows' loads waited for the
    slot's DRAM round trip and the next token's loads for this token's stores (sm_90 PTX order); now the slots
    and every row are loaded first and only the stores depend on the slot. Every table entry, no spills."""
    from hopper_compile import compile_for_hopper
    types = {"key_ptr": "*bf16", "value_ptr": "*bf16", "kc_ptr": "*bf16", "vc_ptr": "*bf16", "slot_ptr": "*i64"}
    compiles = [{"kernel": "_reshape_and_cache_kernel", "types": types, "aligned": list(types) + ["HD", "D"],
                 "constexprs": dict(sc_d=1, BLOCK=cfg["BLOCK"], TOKENS=cfg["TOKENS"]),
                 "num_warps": cfg["num_warps"], "num_stages": 1} for cfg in seed.CONFIGS["by_row"].values()]
    for c, r in zip(compiles, compile_for_hopper(spec.seed_path, compiles)):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['constexprs']} spills: {r['usage']}"
        assert r["loads_before_stores"], f"{c['constexprs']}: a global load after a global store"


def test_writing_a_padding_token_or_one_cache_only_fails(spec):
    a = spec.make_inputs(DIMS, "bf16", seed=2)

    def pad_to_slot_zero(key, value, key_cache, value_cache, slot_mapping):
        slots = slot_mapping.clamp_min(0)
        key_cache.view(-1, 2, 24)[slots] = key
        value_cache.view(-1, 2, 24)[slots] = value

    def key_only(key, value, key_cache, value_cache, slot_mapping):
        keep = slot_mapping >= 0
        key_cache.view(-1, 2, 24)[slot_mapping[keep]] = key[keep]

    assert "key_cache (written in place" in call_failures(spec, pad_to_slot_zero, a, DIMS, "bf16")[0]
    assert call_failures(spec, key_only, a, DIMS, "bf16")[0].startswith("value_cache (written in place")
    assert call_failures(spec, spec.module.baseline, a, DIMS, "bf16") == []


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert any(d["D"] % 2 for d in hold) and all(1 <= d["S"] <= d["T"] <= 1 << 14 for d in hold)


def test_occurrences(spec):
    # Llama 3.1 8B: 32 layers, 8 KV heads / tp 2 = 4, head_dim 128; decode: one sequence per token
    assert spec.module.occurrences(MODELS["llama-3.1-8b"], 2, 64, "decode") == [
        ({"T": 64, "S": 64, "Hk": 4, "D": 128, "BS": 16}, 32)]
    # Qwen3-Next: 12 full-attention layers of 48; 2 KV heads replicated at tp 8; prefill: 8192 // 2048 sequences
    assert spec.module.occurrences(MODELS["qwen3-next-80b-a3b"], 8, 8192, "prefill") == [
        ({"T": 8192, "S": 4, "Hk": 1, "D": 256, "BS": 16}, 12)]
    assert spec.module.occurrences(MODELS["deepseek-v3"], 8, 64, "decode") == []
