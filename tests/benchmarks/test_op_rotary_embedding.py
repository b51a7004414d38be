"""rotary_embedding operator folder: the reference against complex multiplication (both pairings), inputs whose
positions are not the token index, the seed under the interpreter (neox and interleaved, odd head sizes, strided
rows; every FUSED/TOKENS/num_warps setting of both tables and every seed variant on odd head counts; which kernel
and grid each setting launches) and compiled for sm_90, what the tolerances catch, and per-model calls."""
import copy
import random
from pathlib import Path

import pytest
from op_helpers import load_seed, tolerance_failures
from sandbox_seed import evaluate_seed
import torch
import yaml

from agent.studies import seed_variants as sv
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


def _with_configs(seed, monkeypatch, edit):
    configs = copy.deepcopy(seed.CONFIGS)
    edit(configs)
    monkeypatch.setattr(seed, "CONFIGS", configs)


def _exact(spec, fn, dims, neox, seed_no=0):
    inputs = spec.make_inputs(dims, "fp32", seed=seed_no)
    inputs["neox"] = neox
    for out, ref in zip(fn(**inputs), spec.reference(**inputs)):
        assert tolerance_failures(out, ref, spec.tolerance("fp32")) == [], (dims, neox)


# odd head counts, token counts that are not a power of two (nor a multiple of TOKENS), a D that is not one
ODD_SHAPES = [(5, 7, 3, 128), (9, 5, 1, 128), (3, 9, 1, 80), (7, 3, 5, 96)]


@pytest.mark.interpreter
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("fused, tokens, num_warps", [(0, 1, 4), (1, 1, 1), (1, 2, 4), (1, 4, 8), (1, 8, 2)])
@pytest.mark.parametrize("table", ["by_block_half", "prefill_by_block_half"])
def test_every_switch_setting_matches_reference(spec, seed, monkeypatch, table, fused, tokens, num_warps, neox):
    def edit(cfg):
        cfg["decode_max_t"] = 1 << 30 if table == "by_block_half" else 0
        for entry in cfg[table].values():
            entry.update(FUSED=fused, TOKENS=tokens, num_warps=num_warps)
    _with_configs(seed, monkeypatch, edit)
    for T, Hq, Hk, D in ODD_SHAPES:
        _exact(spec, seed.rotary_embedding, {"T": T, "Hq": Hq, "Hk": Hk, "D": D}, neox, seed_no=T * Hq)


@pytest.mark.interpreter
@pytest.mark.parametrize("decode_max_t", [0, 1 << 30])
@pytest.mark.parametrize("name", [n for n, _ in sv.VARIANTS["rotary_embedding"]])
def test_every_variant_matches_reference_on_odd_shapes(spec, seed, name, decode_max_t):
    module = sv.load_seed(spec)
    module.CONFIGS["decode_max_t"] = decode_max_t
    fn = sv.seed_variant(module, dict(sv.VARIANTS["rotary_embedding"])[name])
    for T, Hq, Hk, D in ODD_SHAPES[:2]:
        for neox in (True, False):
            _exact(spec, fn, {"T": T, "Hq": Hq, "Hk": Hk, "D": D}, neox, seed_no=T + Hk)


class _Launches:
    """Stands in for a kernel: records each launch's grid and constexprs, then runs the real kernel."""

    def __init__(self, kernel, log, name):
        self.kernel, self.log, self.name = kernel, log, name

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append((self.name, tuple(grid), kwargs))
            return self.kernel[grid](*args, **kwargs)
        return launch


def _launches(spec, seed, monkeypatch, dims):
    log = []
    for name in ("_rotary_embedding_kernel", "_rotary_embedding_fused_kernel"):
        kernel = getattr(seed, name)
        kernel = kernel.kernel if isinstance(kernel, _Launches) else kernel
        monkeypatch.setattr(seed, name, _Launches(kernel, log, name))
    _exact(spec, seed.rotary_embedding, dims, True)
    assert len(log) == 1, log
    return log[0]


@pytest.mark.interpreter
def test_fused_path_is_one_program_per_tokens_tokens_and_two_programs_is_the_old_grid(spec, seed, monkeypatch):
    def prefill(fused, tokens):
        def edit(cfg):
            cfg["decode_max_t"] = 4
            cfg["prefill_by_block_half"][64].update(FUSED=fused, TOKENS=tokens, num_warps=8)
        return edit
    _with_configs(seed, monkeypatch, prefill(1, 4))
    name, grid, kw = _launches(spec, seed, monkeypatch, {"T": 7, "Hq": 7, "Hk": 1, "D": 128})
    assert (name, grid, kw["TOKENS"], kw["HEADS_Q"], kw["HEADS_K"], kw["num_warps"]) == \
        ("_rotary_embedding_fused_kernel", (2,), 4, 8, 1, 8)
    # T <= decode_max_t: the decode table (one token a program by default)
    name, grid, kw = _launches(spec, seed, monkeypatch, {"T": 3, "Hq": 7, "Hk": 1, "D": 128})
    decode_tokens = seed.CONFIGS["by_block_half"][64]["TOKENS"]
    assert (name, grid, kw["TOKENS"]) == ("_rotary_embedding_fused_kernel", (-(-3 // decode_tokens),), decode_tokens)
    _with_configs(seed, monkeypatch, prefill(0, 4))
    name, grid, kw = _launches(spec, seed, monkeypatch, {"T": 7, "Hq": 7, "Hk": 1, "D": 128})
    assert (name, grid, kw["BLOCK_H"]) == ("_rotary_embedding_kernel", (7, 2), 8)     # a q and a k program a token


@pytest.mark.interpreter
def test_heads_beyond_the_fused_tile_take_fewer_tokens_then_head_blocks(spec, seed, monkeypatch):
    def several_tokens(cfg):      # the committed prefill entry is one token a program: give it four
        cfg.update(decode_max_t=0)
        cfg["prefill_by_block_half"][64]["TOKENS"] = 4
    _with_configs(seed, monkeypatch, several_tokens)
    limit = seed.CONFIGS["max_fused_tile"]
    hq = limit // 64 // 2 + 1                        # padded to limit // 64 heads: one token a program still fits
    name, grid, kw = _launches(spec, seed, monkeypatch, {"T": 5, "Hq": hq, "Hk": 1, "D": 128})
    assert (name, grid, kw["TOKENS"]) == ("_rotary_embedding_fused_kernel", (5,), 1)
    name, grid, kw = _launches(spec, seed, monkeypatch, {"T": 2, "Hq": limit // 64 + 1, "Hk": 3, "D": 128})
    assert name == "_rotary_embedding_kernel" and grid[0] == 2


def test_seed_compiles_for_hopper_without_spills(spec, seed):
    """The fused kernel at what each table picks for the hot heads (Hq 8, Hk 1, D 128) and at the largest tile
    max_fused_tile admits, and the two-program kernel, for sm_90: no spills, and every global load issued before
    the first barrier (with cos loaded and broadcast before sin was loaded, the broadcast's barrier held sin's
    load back by a DRAM round trip on every prefill program)."""
    from hopper_compile import compile_for_hopper
    types = {"q_ptr": "*bf16", "k_ptr": "*bf16", "pos_ptr": "*i64", "cache_ptr": "*fp32", "qo_ptr": "*bf16",
             "ko_ptr": "*bf16"}
    limit = seed.CONFIGS["max_fused_tile"]
    compiles = []
    for table in ("by_block_half", "prefill_by_block_half"):
        cfg = seed.CONFIGS[table][64]
        # 4 tokens as well: a token tile broadcasts cos and sin over the heads behind a barrier (the search may
        # choose it: SEARCH_SPACE["TOKENS"])
        for heads_q, heads_k, tokens in ((8, 1, cfg["TOKENS"]), (8, 1, 4), (limit // 64, 8, 1)):
            compiles.append({"kernel": "_rotary_embedding_fused_kernel", "types": types, "aligned": list(types),
                             "constexprs": dict(HALF=64, BLOCK_HALF=64, TOKENS=tokens, HEADS_Q=heads_q,
                                                HEADS_K=heads_k, IS_NEOX=True, X_EVICT=seed.CONFIGS["x_evict"]),
                             "num_warps": cfg["num_warps"], "num_stages": 1})
    compiles.append({"kernel": "_rotary_embedding_kernel", "types": types, "aligned": list(types),
                     "constexprs": dict(HALF=64, BLOCK_HALF=64, BLOCK_H=8, IS_NEOX=False), "num_warps": 4,
                     "num_stages": 1})
    for c, r in zip(compiles, compile_for_hopper(spec.seed_path, compiles)):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['constexprs']} spills: {r['usage']}"
        assert r["loads_before_barriers"], f"{c['kernel']} {c['constexprs']}: a global load after a barrier"


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
