"""moe_align_block_size operator folder: the layout by hand and by a loop, what check() accepts (any order
inside an expert's group, garbage past n_post_pad) and what it rejects (each invariant), the seed under the
interpreter (one launch, chunked, atomic ranks, strided ids), the block table against the fused_moe seed,
hold-outs and call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import load_seed, assert_seed_accepted
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("moe_align_block_size")


@pytest.fixture()
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_moe_align_block_size_test")


def _inputs(ids, E, block):
    return {"topk_ids": torch.tensor(ids, dtype=torch.int32), "E": E, "block": block}


def _loop_layout(topk_ids, E, block, n_blocks):
    """The same layout by plain Python: experts ascending, pairs in pair order, the sentinel after them."""
    flat = topk_ids.flatten().tolist()
    P = len(flat)
    sorted_ids, experts = [], []
    for e in range(E):
        pairs = [p for p, x in enumerate(flat) if x == e]
        if not pairs:
            continue
        n = -(-len(pairs) // block) * block
        sorted_ids += pairs + [P] * (n - len(pairs))
        experts += [e] * (n // block)
    n_post_pad = len(sorted_ids)
    return sorted_ids + [P] * (n_blocks * block - n_post_pad), experts + [-1] * (n_blocks - len(experts)), n_post_pad


def test_work_by_hand(spec):
    dims = {"T": 64, "k": 8, "E": 128, "block": 16}
    # 512 pairs + min(128, 512) * 15 = 2432 slots -> 152 blocks of 16
    assert spec.module.max_blocks(64, 8, 128, 16) == 152
    assert spec.module.output_spec(dims, "bf16") == (((2432,), "int32"), ((152,), "int32"), ((1,), "int32"))
    W, Q = spec.module.work(dims, "bf16")
    assert W == {"fp32": 2 * 512}
    assert Q == 4 * 512 + 4 * (2432 + 152 + 1)


def test_reference_by_hand(spec):
    # 3 tokens, k=2, E=4, block=2: pairs 0..5 route to experts 2,0 | 1,2 | 2,0
    inp = _inputs([[2, 0], [1, 2], [2, 0]], 4, 2)
    sorted_ids, expert_ids, n = spec.reference(**inp)
    # expert 0: pairs 1,5; expert 1: pair 2 + sentinel 6; expert 2: pairs 0,3,4 + sentinel; expert 3 none
    assert n.tolist() == [8]
    assert sorted_ids[:8].tolist() == [1, 5, 2, 6, 0, 3, 4, 6]
    assert expert_ids[:4].tolist() == [0, 1, 2, 2]
    assert spec.module.check(inp, (sorted_ids, expert_ids, n)) is None


@pytest.mark.parametrize("dims", [{"T": 1, "k": 8, "E": 128, "block": 16}, {"T": 37, "k": 4, "E": 60, "block": 32},
                                  {"T": 300, "k": 2, "E": 8, "block": 128}])
def test_reference_matches_a_loop(spec, dims):
    inp = spec.make_inputs(dims, "bf16", seed=4)
    out = spec.reference(**inp)
    want = _loop_layout(inp["topk_ids"], inp["E"], inp["block"], spec.module.max_blocks(**dims))
    assert (out[0].tolist(), out[1].tolist(), int(out[2])) == want
    assert [t.dtype for t in out] == [torch.int32] * 3


def test_routing_is_router_like(spec):
    ids = spec.make_inputs({"T": 256, "k": 8, "E": 128, "block": 32}, "bf16", seed=0)["topk_ids"]
    assert ids.dtype == torch.int32 and ids.shape == (256, 8)
    assert all(len(set(r)) == 8 for r in ids.tolist()), "k distinct experts per token"
    counts = torch.bincount(ids.flatten().long(), minlength=128)
    assert counts.max() > 2 * counts.float().mean()


def _shuffled_within_groups(out, block, gen):
    """Another valid layout: every expert's run (pairs and sentinels) permuted, garbage past n_post_pad."""
    sorted_ids, expert_ids, n = (t.clone() for t in out)
    n_post_pad = int(n)
    owners = expert_ids[:n_post_pad // block].repeat_interleave(block)
    for e in owners.unique().tolist():
        at = (owners == e).nonzero().flatten()
        sorted_ids[at] = sorted_ids[at][torch.randperm(at.numel(), generator=gen)]
    sorted_ids[n_post_pad:] = 12345
    expert_ids[n_post_pad // block:] = -7
    return sorted_ids, expert_ids, n


def test_check_accepts_any_order_inside_a_group(spec):
    inp = spec.make_inputs({"T": 64, "k": 8, "E": 16, "block": 16}, "bf16", seed=2)
    ref = spec.reference(**inp)
    other = _shuffled_within_groups(ref, 16, torch.Generator().manual_seed(0))
    assert not torch.equal(other[0], ref[0])
    assert spec.module.check(inp, other, ref) is None


def _variants(ref, P, block):
    sorted_ids, expert_ids, n = ref
    twice = sorted_ids.clone()
    twice[1] = twice[0]                                # a pair twice, the one it replaced missing
    zero_pad = torch.where(sorted_ids == P, torch.zeros_like(sorted_ids), sorted_ids)
    two_experts = sorted_ids.clone()                   # swap a pair of block 0 with one of the next expert's
    j = next(i for i in range(block, int(n)) if int(expert_ids[i // block]) != int(expert_ids[0])
             and int(sorted_ids[i]) < P)
    two_experts[0], two_experts[j] = sorted_ids[j], sorted_ids[0]
    out_of_range = sorted_ids.clone()
    out_of_range[2] = P + 5
    descending = expert_ids.clone()
    nb = int(n) // block
    descending[:nb] = expert_ids[:nb].flip(0)
    descending_ids = sorted_ids.clone()
    descending_ids[:int(n)] = sorted_ids[:int(n)].reshape(nb, block).flip(0).reshape(-1)
    return {
        "twice": ((twice, expert_ids, n), "exactly once"),
        "zero_padding": ((zero_pad, expert_ids, n), "sentinel"),
        "two_experts_in_a_block": ((two_experts, expert_ids, n), "block's expert"),
        "n_post_pad": ((sorted_ids, expert_ids, n + block), "n_post_pad is"),
        "out_of_range": ((out_of_range, expert_ids, n), "neither a pair index"),
        "descending_experts": ((descending_ids, descending, n), "ascending expert order"),
        "bad_expert": ((sorted_ids, torch.where(torch.arange(expert_ids.numel()) == 0, E_BAD, expert_ids), n),
                       "is not an expert"),
    }


E_BAD = 999


@pytest.mark.parametrize("name", ["twice", "zero_padding", "two_experts_in_a_block", "n_post_pad", "out_of_range",
                                  "descending_experts", "bad_expert"])
def test_check_names_each_broken_invariant(spec, name):
    inp = spec.make_inputs({"T": 24, "k": 4, "E": 8, "block": 4}, "bf16", seed=5)
    ref = spec.reference(**inp)
    bad, phrase = _variants(ref, 24 * 4, 4)[name]
    msg = spec.module.check(inp, bad, ref)
    assert msg and phrase in msg, msg


@pytest.mark.interpreter
@pytest.mark.parametrize("fill", [0, 1])
@pytest.mark.parametrize("rank", [0, 1, 2])
@pytest.mark.parametrize("dims, chunk", [({"T": 1, "k": 8, "E": 128, "block": 16}, 1024),
                                         ({"T": 13, "k": 4, "E": 13, "block": 16}, 1024),
                                         ({"T": 100, "k": 3, "E": 16, "block": 8}, 64),
                                         ({"T": 301, "k": 8, "E": 60, "block": 32}, 512),
                                         ({"T": 40, "k": 8, "E": 32, "block": 16}, 1024)])
def test_seed_layouts_are_valid(spec, seed, dims, chunk, rank, fill):
    # T=40, E=32: one program whose padding tile is every bin (DIRECT); T=100 and T=301: several chunks (the
    # fill applies to one program only); fill_tile 64 so the one-program fills take several steps
    for _, cfg in seed.CONFIGS["buckets"]:
        cfg.update(CHUNK=chunk, RANK=rank)
    seed.CONFIGS.update(fill=fill, fill_tile=64)
    inp = spec.make_inputs(dims, "fp32", seed=dims["T"])
    out = seed.moe_align_block_size(**inp)
    shapes = tuple((tuple(t.shape), "int32") for t in out)
    assert shapes == spec.module.output_spec(dims, "fp32") and all(t.dtype == torch.int32 for t in out)
    assert spec.module.check(inp, out, spec.reference(**inp)) is None


@pytest.mark.interpreter
def test_seed_reads_strided_ids(spec, seed):
    inp = spec.make_inputs({"T": 9, "k": 4, "E": 8, "block": 4}, "fp32", seed=1)
    ids = inp["topk_ids"].t().contiguous().t()
    assert ids.stride() == (1, 9)
    out = seed.moe_align_block_size(ids, 8, 4)
    assert spec.module.check({**inp, "topk_ids": ids}, out) is None


def test_block_sizes_are_the_fused_moe_seeds(spec):
    fused = load_seed(load_operator("fused_moe").seed_path, "aka_seed_fused_moe_for_align")
    dims = [s.dim for s in spec.shapes] + spec.holdout_dims(random.Random(3))
    assert dims
    for d in dims:
        assert d["block"] == fused._pick_config(d["T"], d["E"], d["k"])["BLOCK_M"], d


def test_holdouts(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(30):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["E"] & (d["E"] - 1) for d in hold), "an expert count that is not a power of two"
        assert any(d["T"] > max(h["T"] for h in hot) for d in hold)
        assert all(d["k"] <= d["E"] and d["block"] == spec.module.block_size(d["T"], d["k"], d["E"]) for d in hold)


def test_occurrences(spec):
    occ = spec.module.occurrences
    # DeepSeek-V3: 58 MoE layers; T*k/E = 64*8/256 = 2 -> block 16; 4096*8/256 = 128 -> block 128
    assert occ(MODELS["deepseek-v3"], 8, 64) == [({"T": 64, "k": 8, "E": 256, "block": 16}, 58)]
    assert occ(MODELS["deepseek-v3"], 8, 4096) == [({"T": 4096, "k": 8, "E": 256, "block": 128}, 58)]
    # Mixtral: 16*2/8 = 4 rows per expert -> block 16; 64*2/8 = 16 -> block 32
    assert occ(MODELS["mixtral-8x7b"], 2, 16) == [({"T": 16, "k": 2, "E": 8, "block": 16}, 32)]
    assert occ(MODELS["mixtral-8x7b"], 2, 64) == [({"T": 64, "k": 2, "E": 8, "block": 32}, 32)]
    assert occ(MODELS["llama-3.1-8b"], 1, 16) == []


def test_seed_compiles_for_hopper_without_spills(spec):
    from hopper_compile import compile_for_hopper
    ptrs = {n: "*i32" for n in ("ids_ptr", "counts_ptr", "cursor_ptr", "sorted_ptr", "expert_ids_ptr",
                                "n_post_pad_ptr")}
    compiles = []
    # one program at E=512 (Qwen3-Next decode) with the sentinel fill and without it (its experts x BLOCK
    # tiles), chunked at E=512 with block 128; every rank mode
    for one, fill, block, experts, rank, chunk in [(1, 1, 16, 512, 0, 2048), (1, 1, 16, 512, 1, 512),
                                                   (1, 1, 16, 512, 2, 512), (1, 0, 16, 512, 1, 2048),
                                                   (0, 0, 128, 16, 0, 2048), (0, 0, 128, 16, 1, 256),
                                                   (0, 0, 128, 16, 2, 256)]:
        tile = experts if fill else min(experts, 2048 // block)
        compiles.append({"kernel": "_moe_align_block_size_kernel", "types": ptrs, "aligned": list(ptrs),
                         "constexprs": dict(K=10, CHUNK=chunk, NUM_BINS=512, BLOCK=block, ONE_CHUNK=one,
                                            COUNT_ROWS=16, EXPERTS=experts, EXPERT_TILE=tile, MAP_TILE=4,
                                            RANK=rank, MATCH_TILE=32, DIRECT=int(tile == 512), FILL=fill,
                                            FILL_TILE=1024),
                         "num_warps": 8, "num_stages": 1})
    compiles.append({"kernel": "_moe_align_block_size_count_kernel", "types": ptrs, "aligned": ["ids_ptr", "counts_ptr"],
                     "constexprs": dict(K=10, CHUNK=2048, NUM_BINS=512), "num_warps": 8, "num_stages": 1})
    for c, r in zip(compiles, compile_for_hopper(spec.seed_path, compiles)):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['constexprs']} spills: {r['usage']}"



@pytest.mark.interpreter
def test_seed_is_accepted_by_the_sandbox(spec):
    assert_seed_accepted(spec)


@pytest.mark.gpu
def test_seed_is_accepted_and_timed_on_the_gpu(spec):
    assert_seed_accepted(spec, gpu=True)
