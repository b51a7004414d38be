"""gemm: work model by hand, inputs, hold-out and interpreter shapes, model occurrences, the seed kernel
under the interpreter, its Hopper compilation (wgmma, no spills) and, on a GPU, at real sizes."""
import random
from pathlib import Path

import hopper_compile
import pytest
from op_helpers import assert_within, load_seed
import torch
import yaml

from benchmarks.hardware import load_hardware
from benchmarks.roofline import roofline
from benchmarks.operators.gemm import operator as op

SEED_PATH = Path(op.__file__).with_name("seed.py")
MODELS = yaml.safe_load((Path(op.__file__).resolve().parents[3] / "configs" / "models.yaml").read_text())


def _load_seed(name="gemm_seed_under_test"):
    return load_seed(SEED_PATH, name)


# ---- work model --------------------------------------------------------------------------------
def test_work_llama8b_qkv_decode_by_hand():
    # M=16 tokens through Llama-3.1-8B's qkv projection: N = (32 + 2*8) * 128 = 6144, K = 4096, bf16.
    W, Q = op.work({"M": 16, "N": 6144, "K": 4096}, "bf16")
    assert W == {"bf16": 2 * 16 * 6144 * 4096} == {"bf16": 805_306_368}
    # (M*K + N*K + M*N) * 2 = (65_536 + 25_165_824 + 98_304) * 2
    assert Q == 50_659_328
    r = roofline(W, Q, load_hardware("h200"))
    # 805_306_368 / 989.4e12 = 0.814 us of compute < 50_659_328 / 4.8e12 = 10.554 us of memory
    assert r.bound == "memory"
    assert r.t_roof_s == pytest.approx(50_659_328 / 4.8e12, rel=1e-12)
    assert r.t_roof_s * 1e6 == pytest.approx(10.554, abs=1e-3)


def test_work_llama8b_gate_up_prefill_by_hand():
    # M=4096, N = 2 * 14336 = 28672, K = 4096, bf16.
    W, Q = op.work({"M": 4096, "N": 28672, "K": 4096}, "bf16")
    assert W == {"bf16": 962_072_674_304}          # 2 * 4096 * 28672 * 4096
    # (16_777_216 + 117_440_512 + 117_440_512) * 2
    assert Q == 503_316_480
    r = roofline(W, Q, load_hardware("h200"))
    assert r.bound == "compute"                     # 972.38 us of compute vs 104.86 us of memory
    assert r.t_roof_s * 1e6 == pytest.approx(962_072_674_304 / 989.4e12 * 1e6, rel=1e-12)
    assert r.t_roof_s * 1e6 == pytest.approx(972.38, abs=0.01)


def test_work_counts_four_bytes_for_fp32():
    W, Q = op.work({"M": 3, "N": 5, "K": 7}, "fp32")
    assert W == {"fp32": 210} and Q == (21 + 35 + 15) * 4


def test_unsupported_dtype_says_what_is():
    with pytest.raises(ValueError, match="bf16"):
        op.work({"M": 1, "N": 1, "K": 1}, "fp8")


# ---- inputs ------------------------------------------------------------------------------------
def test_inputs_have_outlier_channels_and_linear_weight_scale():
    inp = op.make_inputs({"M": 256, "N": 512, "K": 2048}, "fp32", seed=5, device="cpu")
    a, b = inp["a"], inp["b"]
    assert a.shape == (256, 2048) and b.shape == (512, 2048) and a.dtype == b.dtype == torch.float32
    col_rms = a.pow(2).mean(0).sqrt()
    n_outliers = int((col_rms > 10).sum())
    assert 1 <= n_outliers <= 10                         # round(0.002 * 2048) = 4 channels scaled 20-100x
    assert col_rms.median() == pytest.approx(1.0, abs=0.1)
    assert b.std().item() == pytest.approx(2048 ** -0.5, rel=0.05)
    out = op.reference(**inp)
    assert 0.5 < out.std().item() < 10                   # O(1) outputs, never zeros


def test_inputs_are_deterministic_per_seed():
    x = op.make_inputs({"M": 3, "N": 17, "K": 33}, "bf16", seed=1)
    y = op.make_inputs({"M": 3, "N": 17, "K": 33}, "bf16", seed=1)
    z = op.make_inputs({"M": 3, "N": 17, "K": 33}, "bf16", seed=2)
    assert all(torch.equal(x[n], y[n]) for n in op.ARGS)
    assert not torch.equal(x["a"], z["a"]) and not torch.equal(x["b"], z["b"])
    assert x["a"].dtype == torch.bfloat16


# ---- interpreter and hold-out shapes -------------------------------------------------------------
def test_interpreter_dims_are_small_and_keep_ragged_sizes_ragged():
    d = op.interpreter_dims({"M": 4096, "N": 28672, "K": 14336})
    assert d == {"M": 64, "N": 64, "K": 64}
    d = op.interpreter_dims({"M": 4095, "N": 4104, "K": 2880})
    assert max(d.values()) <= 64
    assert d["M"] % 2 == 1 and d["N"] % 16 == 4104 % 16 and d["K"] % 16 == 2880 % 16
    assert op.interpreter_dims({"M": 1, "N": 33, "K": 7}) == {"M": 1, "N": 33, "K": 7}


def test_holdout_has_ragged_odd_and_larger_shapes():
    hot = [{"M": 1, "N": 6144, "K": 4096}, {"M": 64, "N": 4096, "K": 14336}, {"M": 8192, "N": 28672, "K": 4096}]
    hold = op.holdout_dims(random.Random(3), hot)
    assert any(h["M"] % 2 == 1 and h["M"] < 16 for h in hold)
    assert any(h["N"] % 16 and h["K"] % 16 for h in hold)
    assert any(h["M"] > 8192 for h in hold) and all(h["M"] <= op.HOLDOUT_MAX_M for h in hold)
    assert all(h["M"] & (h["M"] - 1) for h in hold if h["M"] > 16)      # no power-of-two token counts
    assert hold != op.holdout_dims(random.Random(4), hot)


# ---- occurrences -------------------------------------------------------------------------------
def _occ(model, tp, tokens=64):
    return {(d["M"], d["N"], d["K"]): c for d, c in op.occurrences(MODELS[model], tp, tokens)}


def test_occurrences_llama_3_1_8b():
    # 32 layers; qkv N = (32 + 2*8)*128 = 6144; o K = 32*128 = 4096; gate_up N = 2*14336; down K = 14336.
    assert _occ("llama-3.1-8b", 1) == {(64, 6144, 4096): 32, (64, 4096, 4096): 32,
                                       (64, 28672, 4096): 32, (64, 4096, 14336): 32}


def test_occurrences_qwen3_30b_a3b():
    # 48 layers; qkv N = (32 + 2*4)*128 = 5120, K = 2048; o N = 2048, K = 32*128 = 4096; router N = 128 experts.
    # The experts themselves are fused_moe's.
    assert _occ("qwen3-30b-a3b", 1, tokens=7) == {(7, 5120, 2048): 48, (7, 2048, 4096): 48, (7, 128, 2048): 48}


def test_occurrences_llama_70b_tp8_and_deepseek_v3_tp8():
    # 64/8 = 8 query heads and 8/8 = 1 KV head per GPU: qkv N = (8 + 2)*128 = 1280.
    assert _occ("llama-3.1-70b", 8) == {(64, 1280, 8192): 80, (64, 8192, 1024): 80,
                                        (64, 7168, 8192): 80, (64, 8192, 3584): 80}
    # MLA in all 61 layers: q_a 1536x7168 and kv_a (512+64)x7168 replicated; q_b 16 heads*192 = 3072 x 1536;
    # o 7168 x 16*128. Dense MLP in the first 3 layers (18432/8 = 2304); in the 58 MoE layers the shared
    # expert (2048/8 = 256) and the router (256 experts).
    assert _occ("deepseek-v3", 8) == {
        (64, 1536, 7168): 61, (64, 3072, 1536): 61, (64, 576, 7168): 61, (64, 7168, 2048): 61,
        (64, 4608, 7168): 3, (64, 7168, 2304): 3, (64, 512, 7168): 58, (64, 7168, 256): 58,
        (64, 256, 7168): 58}


def test_occurrences_merge_identical_dims_and_reject_bad_tp():
    cfg = {"hidden_size": 4096, "intermediate_size": 4096, "num_hidden_layers": 2,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128}
    # o (N=4096, K=32*128) and down (N=4096, K=4096) coincide: one entry with both counts.
    occ = _dict(op.occurrences(cfg, 1, 5))
    assert occ[(5, 4096, 4096)] == 4 and sum(occ.values()) == 8
    with pytest.raises(ValueError, match="tp=3"):
        op.occurrences(MODELS["llama-3.1-8b"], 3, 1)


def _dict(occ):
    return {(d["M"], d["N"], d["K"]): c for d, c in occ}


# ---- the seed's configuration rule ---------------------------------------------------------------
def test_seed_config_fills_the_gpu_in_decode_and_uses_big_tiles_in_prefill():
    seed = _load_seed()
    small = seed._pick_config(1, 4096)
    programs = -(-1 // small["BLOCK_M"]) * -(-4096 // small["BLOCK_N"])
    assert small["BLOCK_M"] == 16 and programs >= seed.CONFIGS["min_programs"]
    big = seed._pick_config(8192, 28672)
    last = seed.CONFIGS["buckets"][-1][1]
    assert (big["BLOCK_M"], big["BLOCK_N"]) == (last["BLOCK_M"], last["BLOCK_N"])   # no narrowing at prefill
    assert big["BLOCK_M"] >= 128 and big["BLOCK_N"] >= 128                          # wgmma-sized tiles
    # M=256, N=4096 with 128x128 tiles is 64 programs: the rule narrows the tile to reach ~one per SM.
    mid = seed._pick_config(256, 4096)
    assert -(-256 // mid["BLOCK_M"]) * -(-4096 // mid["BLOCK_N"]) >= seed.CONFIGS["min_programs"]
    assert mid["BLOCK_M"] >= 64 and mid["BLOCK_N"] >= 64


# ---- the seed under the interpreter ----------------------------------------------------------------
INTERP_SHAPES = [
    {"M": 1, "N": 64, "K": 64},      # decode row
    {"M": 7, "N": 33, "K": 49},      # odd everything
    {"M": 64, "N": 64, "K": 64},     # full tiles
    {"M": 37, "N": 50, "K": 63},     # ragged in M, N and the K tail
]


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("dims", INTERP_SHAPES, ids=lambda d: "x".join(str(v) for v in d.values()))
def test_seed_matches_reference_under_the_interpreter(dims, dtype):
    seed = _load_seed()
    inp = op.make_inputs(dims, dtype, seed=21, device="cpu")
    kept = {n: t.clone() for n, t in inp.items()}
    out = seed.gemm(**inp)
    assert_within(out, op.reference(**kept), op.TOLERANCES[dtype])
    assert all(torch.equal(inp[n], kept[n]) for n in inp), "the seed modified its inputs"


SWITCHES = [dict(TMA=1), dict(PERSISTENT=1), dict(TMA=1, PERSISTENT=1), dict(SPLIT_K=3),
            dict(SPLIT_K=2, TMA=1, PERSISTENT=1), dict(TMA=1, PERSISTENT=1, FLATTEN=1)]


@pytest.mark.interpreter
@pytest.mark.parametrize("switches", SWITCHES, ids=lambda d: "-".join(f"{k}{v}" for k, v in d.items()))
@pytest.mark.parametrize("dims", [{"M": 7, "N": 33, "K": 48}, {"M": 37, "N": 50, "K": 72}],
                         ids=lambda d: "x".join(str(v) for v in d.values()))
def test_every_switch_setting_matches_reference(dims, switches, monkeypatch):
    """The structural switches the search and the study flip (TMA, persistent grid, split-K) at tile sizes
    that leave ragged edges in M, N and K. K = 48 and 72 keep TMA's 16-byte row rule in fp32."""
    seed = _load_seed()
    buckets = [(bound, dict(cfg, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, STREAM_K=0, **switches))
               for bound, cfg in seed.CONFIGS["buckets"]]
    monkeypatch.setitem(seed.CONFIGS, "buckets", buckets)
    monkeypatch.setitem(seed.CONFIGS, "min_programs", 1)
    monkeypatch.setattr(seed, "_sm_count", lambda t: 3)       # fewer programs than tiles: the loop runs
    inp = op.make_inputs(dims, "fp32", seed=5, device="cpu")
    assert seed._tma_ready(inp["a"]) and seed._tma_ready(inp["b"])
    assert_within(seed.gemm(**inp), op.reference(**inp), op.TOLERANCES["fp32"])


@pytest.mark.interpreter
def test_tma_falls_back_to_pointers_when_a_row_stride_breaks_the_16_byte_rule(monkeypatch):
    seed = _load_seed()
    buckets = [(bound, dict(cfg, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, TMA=1, STREAM_K=0))
               for bound, cfg in seed.CONFIGS["buckets"]]
    monkeypatch.setitem(seed.CONFIGS, "buckets", buckets)
    inp = op.make_inputs({"M": 5, "N": 20, "K": 33}, "fp32", seed=6, device="cpu")     # 132-byte rows
    assert not seed._tma_ready(inp["a"])
    assert_within(seed.gemm(**inp), op.reference(**inp), op.TOLERANCES["fp32"])


@pytest.mark.interpreter
def test_seed_handles_a_strided_activation_view():
    seed = _load_seed()
    inp = op.make_inputs({"M": 9, "N": 24, "K": 40}, "fp32", seed=4)
    wide = torch.zeros(9, 56)
    wide[:, 8:48] = inp["a"]
    a_view = wide[:, 8:48]                    # row stride 56, not K
    out = seed.gemm(a_view, inp["b"])
    assert_within(out, op.reference(inp["a"], inp["b"]), op.TOLERANCES["fp32"])


@pytest.mark.interpreter
@pytest.mark.parametrize("programs", [1, 3, 7, 11, 16])
@pytest.mark.parametrize("tma", [0, 1])
def test_stream_k_matches_reference_whatever_the_programs_cut(programs, tma, monkeypatch):
    """STREAM_K: c's 2 tile rows (M = 30 over 16-row tiles) get programs // 2 programs each (at least one), the
    r-th owning iterations [r * I / R, (r + 1) * I / R) of its row's 2 tile columns x 5 K tiles. With 1, 3, 5
    and 8 programs a row the cuts fall inside tiles, a tile spread over up to three programs, one program's
    range inside a single tile, so every way a tile's parts are published and added runs. Ragged M, N and a
    K tail (K = 72 over 16-wide K tiles)."""
    seed = _load_seed()
    buckets = [(bound, dict(cfg, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, STREAM_K=1, TMA=tma, SPLIT_K=1, stream_k_tile={}))
               for bound, cfg in seed.CONFIGS["buckets"]]
    monkeypatch.setitem(seed.CONFIGS, "buckets", buckets)
    monkeypatch.setitem(seed.CONFIGS, "stream_k_min_iters", 1)
    monkeypatch.setitem(seed.CONFIGS, "stream_k_min_k", 0)
    monkeypatch.setitem(seed.CONFIGS, "stream_k_max_tile_share", 1e9)     # 4 tiles for 1 or 3 "SMs": still stream-K
    monkeypatch.setattr(seed, "_sm_count", lambda t: programs)
    assert seed._stream_k_config(30, 20, 72, programs) is not None
    inp = op.make_inputs({"M": 30, "N": 20, "K": 72}, "fp32", seed=9, device="cpu")
    assert_within(seed.gemm(**inp), op.reference(**inp), op.TOLERANCES["fp32"])


def test_stream_k_runs_only_where_one_tile_a_program_would_leave_sms_idle():
    """stream_k_max_tile_share = 0.75 of 132 SMs, K >= stream_k_min_k: M64-N7168's 112 tiles of 64 x 64 keep one
    tile a program (stream-K lost there), M64-N1280's 20 take stream-K on the bucket's tile, M256-N1536 on the
    64 x 64 stream-K tile (96 tiles; its own 128 x 128 would be 24), M256-N7168 (448 of them) and prefill never."""
    seed = _load_seed()
    assert seed._stream_k_config(64, 7168, 8192, 132) is None
    small = seed._stream_k_config(64, 1280, 8192, 132)
    assert small is not None and (small["BLOCK_M"], small["BLOCK_N"]) == (64, 64) and small["TMA"] == 0
    mid = seed._stream_k_config(256, 1536, 7168, 132)
    assert mid is not None and (mid["BLOCK_M"], mid["BLOCK_N"], mid["TMA"]) == (64, 64, 1)
    assert seed._stream_k_config(256, 7168, 8192, 132) is None
    assert seed._stream_k_config(8192, 128, 4096, 132) is None
    assert seed._stream_k_config(64, 1280, 8192, 16) is None        # a small GPU: 20 tiles fill it
    assert seed._stream_k_config(0, 1280, 8192, 132) is None
    assert seed._stream_k_config(64, 1280, 4096, 132) is None       # K < stream_k_min_k: a short call, no idle to win


@pytest.mark.interpreter
def test_stream_k_takes_fewer_programs_when_there_is_little_work(monkeypatch):
    """stream_k_min_iters: 6 K tiles in all at 3 a program is 2 programs, not one an SM (each would hold a
    sliver of a tile and the fix-up would cost more than the work)."""
    seed = _load_seed()
    buckets = [(bound, dict(cfg, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, STREAM_K=1, TMA=0, SPLIT_K=1, stream_k_tile={}))
               for bound, cfg in seed.CONFIGS["buckets"]]
    monkeypatch.setitem(seed.CONFIGS, "buckets", buckets)
    monkeypatch.setitem(seed.CONFIGS, "stream_k_min_iters", 3)
    monkeypatch.setitem(seed.CONFIGS, "stream_k_min_k", 0)
    grids = []
    kernel = seed._gemm_stream_k_kernel
    monkeypatch.setattr(seed, "_gemm_stream_k_kernel",
                        type("Spy", (), {"__getitem__": lambda self, g: (grids.append(g), kernel[g])[1]})())
    inp = op.make_inputs({"M": 16, "N": 32, "K": 48}, "fp32", seed=3, device="cpu")      # 2 tiles x 3 K tiles
    assert_within(seed.gemm(**inp), op.reference(**inp), op.TOLERANCES["fp32"])
    assert grids == [(2,)]


def test_fp32_tolerance_rejects_tf32_products():
    """fp32 means fp32: rounding both operands to TF32 (10-bit mantissa) must fail the bound."""
    inp = op.make_inputs({"M": 64, "N": 64, "K": 512}, "fp32", seed=8)

    def tf32(x):
        # round to nearest on the 13 mantissa bits TF32 drops (24 - 11 = 13)
        return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)

    sloppy = (tf32(inp["a"]) @ tf32(inp["b"]).T)
    ref = op.reference(**inp)
    rel_l2 = ((sloppy.double() - ref.double()).norm() / ref.double().norm()).item()
    assert rel_l2 > op.TOLERANCES["fp32"].rel_l2


# ---- Hopper compilation (no GPU needed) ------------------------------------------------------------
def compile_for_hopper(compiles: list[dict]) -> list[dict]:
    return hopper_compile.compile_for_hopper(SEED_PATH, compiles)


def _hopper_compile_item(cfg: dict) -> dict:
    """One sm_90 compile of _gemm_kernel as a bf16 launch would specialize it (unit strides constant,
    16-aligned pointers and sizes hinted), with the tensor descriptors' types when TMA is on."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    types = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16"}
    const = {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1, "EVEN_K": True, "DOT_PRECISION": "tf32",
             **{k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "TMA", "PERSISTENT",
                                    "WARP_SPECIALIZE", "FLATTEN")}}
    if cfg["TMA"]:
        types.update(a_desc=f"tensordesc<bf16[{bm}, {bk}]>", b_desc=f"tensordesc<bf16[{bn}, {bk}]>",
                     c_desc=f"tensordesc<bf16[{bm}, {bn}]>")
    else:
        const.update(a_desc=None, b_desc=None, c_desc=None)
    if cfg["SPLIT_K"] > 1:
        types["ws_ptr"] = "*fp32"
    else:
        const["ws_ptr"] = None
    return {"kernel": "_gemm_kernel", "types": types, "constexprs": const,
            "aligned": ["a_ptr", "b_ptr", "c_ptr", "N", "K", "stride_am", "stride_bn", "stride_cm"],
            "num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}


def _stream_k_compile_item(cfg: dict) -> dict:
    """One sm_90 compile of _gemm_stream_k_kernel as a bf16 launch with TMA loads specializes it."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    types = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "ws_ptr": "*fp32", "flag_ptr": "*i32",
             "a_desc": f"tensordesc<bf16[{bm}, {bk}]>", "b_desc": f"tensordesc<bf16[{bn}, {bk}]>",
             "c_desc": f"tensordesc<bf16[{bm}, {bn}]>"}
    const = {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1, "EVEN_K": True, "DOT_PRECISION": "tf32", "TMA": 1,
             "FIX_ROWS": min(bm, 32),
             **{k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}}
    return {"kernel": "_gemm_stream_k_kernel", "types": types, "constexprs": const,
            "aligned": ["a_ptr", "b_ptr", "c_ptr", "N", "K", "stride_am", "stride_bn", "stride_cm"],
            "num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}


@pytest.mark.slow
def test_stream_k_compiles_for_hopper_with_wgmma_tma_and_no_spills():
    """The stream-K tile every STREAM_K bucket with TMA launches (its stream_k_tile, else its own), the M <= 256
    bucket's own 128 x 128 tile, and two wider ones. That own tile on 4 warps and 5 stages, which the bucket never
    launches as stream-K (its stream_k_tile is 64 x 64), builds with a 24-byte stack under triton 3.6 (`make
    test-device-triton`, 2026-12-06; clean under 3.7): there only, that one case may spill, and a search move that
    reaches it is dropped by the spill check, which runs on the GPU machine's Triton, before the GPU."""
    seed = _load_seed()
    m256 = next(cfg for bound, cfg in seed.CONFIGS["buckets"] if bound == 256)
    launched = [dict(cfg, **cfg.get("stream_k_tile", {})) for _, cfg in seed.CONFIGS["buckets"] if cfg["STREAM_K"]]
    launched = [cfg for cfg in launched if cfg["TMA"]]        # this compile item builds the TMA form
    own = dict(m256, STREAM_K=1)
    cases = [*launched, own, dict(m256, BLOCK_N=256, num_warps=8, num_stages=3), dict(m256, BLOCK_M=64, num_stages=5)]
    for cfg, r in zip(cases, compile_for_hopper([_stream_k_compile_item(c) for c in cases])):
        assert r["wgmma"] and r["tma"], f"{cfg}: wgmma {r['wgmma']}, tma {r['tma']}"
        if cfg is own and r["triton"].startswith("3.6."):
            continue
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{cfg} spills: {r['usage']}"


@pytest.mark.slow
def test_seed_compiles_for_hopper_with_wgmma_and_no_spills():
    seed = _load_seed()
    prefill = seed.CONFIGS["buckets"][-1][1]
    decode = seed.CONFIGS["buckets"][0][1]
    cases = [(f"bucket M<={bound}", cfg) for bound, cfg in seed.CONFIGS["buckets"]] + [
        ("prefill TMA", dict(prefill, TMA=1)),
        ("prefill TMA persistent", dict(prefill, TMA=1, PERSISTENT=1, FLATTEN=1, num_stages=4)),
        ("decode TMA split-K", dict(decode, TMA=1, SPLIT_K=4))]
    results = compile_for_hopper([_hopper_compile_item(cfg) for _, cfg in cases])
    assert len(results) == len(cases)
    for (name, cfg), r in zip(cases, results):
        if cfg["BLOCK_M"] >= 64:    # wgmma tiles are 64 rows per warp group; thinner tiles use mma.sync
            assert r["wgmma"], f"{name}: no wgmma in the PTX"
        assert r["tma"] == bool(cfg["TMA"]), f"{name}: TMA in the PTX is {r['tma']}, the switch {cfg['TMA']}"
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{name} spills: {r['usage']}"


# ---- on the GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dims", [{"M": 1, "N": 6144, "K": 4096}, {"M": 16, "N": 4096, "K": 14336},
                                  {"M": 256, "N": 28672, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096},
                                  {"M": 1000, "N": 1283, "K": 4093}])
def test_seed_matches_reference_on_the_gpu_in_bf16(dims):
    seed = _load_seed()
    inp = op.make_inputs(dims, "bf16", seed=2, device="cuda")
    out = seed.gemm(**inp)
    assert_within(out, op.reference(**inp), op.TOLERANCES["bf16"])


@pytest.mark.gpu
@pytest.mark.parametrize("dims", [{"M": 256, "N": 7168, "K": 8192}, {"M": 64, "N": 7168, "K": 8192},
                                  {"M": 200, "N": 1283, "K": 4093}, {"M": 256, "N": 128, "K": 4096}])
def test_stream_k_matches_reference_and_repeats_bit_for_bit_on_the_gpu(dims, monkeypatch):
    """On the GPU the parts of a tile really race: 50 calls must give the reference's answer and the same
    bits every time (the fix-up adds parts in a fixed order; a part read before it was written would not)."""
    seed = _load_seed()
    monkeypatch.setitem(seed.CONFIGS, "stream_k_max_tile_share", 1e9)      # stream-K at every shape up to M = 256
    monkeypatch.setitem(seed.CONFIGS, "stream_k_min_k", 0)
    inp = op.make_inputs(dims, "bf16", seed=2, device="cuda")
    first = seed.gemm(**inp)
    assert_within(first, op.reference(**inp), op.TOLERANCES["bf16"])
    for _ in range(50):
        assert torch.equal(seed.gemm(**inp), first)


@pytest.mark.gpu
def test_stream_k_is_cuda_graph_capturable(monkeypatch):
    seed = _load_seed()
    monkeypatch.setitem(seed.CONFIGS, "stream_k_max_tile_share", 1e9)
    monkeypatch.setitem(seed.CONFIGS, "stream_k_min_k", 0)
    inp = op.make_inputs({"M": 256, "N": 7168, "K": 8192}, "bf16", seed=3, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        eager = seed.gemm(**inp)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = seed.gemm(**inp)
    for _ in range(3):
        graph.replay()      # the flags are zeroed inside the graph: every replay starts clean
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)


@pytest.mark.gpu
def test_seed_is_cuda_graph_capturable():
    seed = _load_seed()
    inp = op.make_inputs({"M": 16, "N": 4096, "K": 4096}, "bf16", seed=3, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        eager = seed.gemm(**inp)          # compiles outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = seed.gemm(**inp)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)
