"""silu_and_mul operator folder: work model by hand, seed vs reference under the interpreter, seeded
inputs with outliers, hold-out shapes, per-model call counts, and the sm_90 compile of the seed."""
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from op_helpers import load_seed, tolerance_failures
import torch
import yaml

from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.roofline import roofline

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("silu_and_mul")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_silu_and_mul_test")


# ---- work model ---------------------------------------------------------------------------------

def test_work_decode_bf16_by_hand(spec):
    W, Q = spec.module.work({"T": 1, "I": 14336}, "bf16")
    assert W == {"fp32": 5 * 1 * 14336} == {"fp32": 71680}
    # x read: 1 * 2 * 14336 * 2 B = 57344; out written: 1 * 14336 * 2 B = 28672
    assert Q == 86016
    r = roofline(W, Q, load_hardware("h200"))
    assert r.bound == "memory"
    assert r.t_roof_s == pytest.approx(86016 / 4.8e12)            # 17.92 ns
    assert r.t_roof_s == pytest.approx(17.92e-9)


def test_work_prefill_fp32_by_hand(spec):
    W, Q = spec.module.work({"T": 4096, "I": 2304}, "fp32")
    assert W == {"fp32": 5 * 4096 * 2304} == {"fp32": 47_185_920}
    # x: 4096 * 4608 * 4 B = 75,497,472; out: 4096 * 2304 * 4 B = 37,748,736
    assert Q == 113_246_208
    r = roofline(W, Q, load_hardware("h200"))
    assert r.t_roof_s == pytest.approx(23.593e-6, rel=1e-4)        # memory: Q / 4.8e12
    assert r.t_compute_s == pytest.approx(0.7053e-6, rel=1e-3)     # 47,185,920 / 66.9e12


def test_output_spec_and_reference(spec):
    assert spec.output_spec({"T": 5, "I": 300}, "fp16") == ((5, 300), "fp16")
    x = torch.tensor([[0.0, 1.0, -2.0, 2.0, 3.0, 0.5]])
    # gate [0, 1, -2], up [2, 3, 0.5]: silu(0) = 0, silu(1) = 1 / (1 + e^-1), silu(-2) = -2 / (1 + e^2)
    expect = torch.tensor([[0.0, 3 / (1 + torch.e ** -1), 0.5 * -2 / (1 + torch.e ** 2)]])
    torch.testing.assert_close(spec.reference(x), expect)
    out = spec.reference(spec.make_inputs({"T": 5, "I": 300}, "bf16", seed=0, device="cpu")["x"])
    assert out.shape == (5, 300) and out.dtype == torch.bfloat16


# ---- inputs -------------------------------------------------------------------------------------

def test_make_inputs_deterministic_and_seeded(spec):
    dims = {"T": 16, "I": 256}
    a = spec.make_inputs(dims, "bf16", seed=5, device="cpu")
    b = spec.make_inputs(dims, "bf16", seed=5, device="cpu")
    c = spec.make_inputs(dims, "bf16", seed=6, device="cpu")
    assert set(a) == {"x"} and a["x"].shape == (16, 512) and a["x"].dtype == torch.bfloat16
    assert torch.equal(a["x"], b["x"]) and not torch.equal(a["x"], c["x"])
    assert a["x"].abs().sum() > 0 and torch.isfinite(a["x"].float()).all()


@pytest.mark.parametrize("I, expected", [(2048, 20), (500, 5), (32, 1)])
def test_make_inputs_has_outlier_channels(spec, I, expected):
    x = spec.make_inputs({"T": 256, "I": I}, "fp32", seed=2, device="cpu")["x"]
    channel_rms = x.pow(2).mean(0).sqrt()
    # 0.5% of the 2I channels (at least one) are scaled 20-100x; the rest have rms ~1 over 256 tokens
    assert (channel_rms > 10).sum().item() == expected
    assert channel_rms.max() > 15 and channel_rms.median() < 1.5


def test_tolerance_rejects_swapped_halves(spec):
    # Inputs are not symmetric in gate and up, so a kernel that mixes them up fails even in bf16.
    x = spec.make_inputs({"T": 4, "I": 256}, "bf16", seed=3, device="cpu")["x"]
    swapped = torch.cat([x[:, 256:], x[:, :256]], dim=1)
    assert tolerance_failures(spec.reference(swapped), spec.reference(x), spec.tolerance("bf16"))


# ---- seed vs reference under the interpreter -------------------------------------------------

SMALL_DIMS = [(1, 256), (3, 200), (4, 37), (2, 3000), (5, 128)]


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("T, I", SMALL_DIMS)
def test_seed_matches_reference(spec, seed, dtype, T, I):
    inputs = spec.make_inputs({"T": T, "I": I}, dtype, seed=T * 1000 + I, device="cpu")
    x_before = inputs["x"].clone()
    out = seed.silu_and_mul(**inputs)
    ref = spec.reference(**inputs)
    assert out.shape == ref.shape and out.dtype == ref.dtype and out.is_contiguous()
    assert torch.equal(inputs["x"], x_before), "the seed must not write into its input"
    assert tolerance_failures(out, ref, spec.tolerance(dtype)) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("flat", [0, 1])
@pytest.mark.parametrize("T, I", [(3, 200), (5, 128), (2, 37)])
def test_both_launch_shapes_match_reference(spec, seed, monkeypatch, flat, T, I):
    """The FLAT switch the search and the study flip: both values are the same function."""
    buckets = [(bound, dict(cfg, FLAT=flat, BLOCK=256)) for bound, cfg in seed.CONFIGS["by_outputs"]]
    monkeypatch.setitem(seed.CONFIGS, "by_outputs", buckets)
    assert seed._launch(T, I)["FLAT"] == flat
    inputs = spec.make_inputs({"T": T, "I": I}, "fp32", seed=T + I, device="cpu")
    x = inputs["x"]
    view = torch.cat([x, x[:, :6]], dim=1)[:, : 2 * I]          # row stride 2I + 6
    for arg in (x, view):
        assert tolerance_failures(seed.silu_and_mul(arg), spec.reference(arg), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("T, I", [(4, 256), (3, 200), (2, 37)])
def test_constant_width_flat_path_matches_reference_and_falls_back_where_it_does_not_apply(spec, seed, monkeypatch,
                                                                                          T, I):
    """FLAT=3 (I a compile-time constant, int32 offsets): unmasked where BLOCK divides T*I (4 x 256 with BLOCK
    256), masked otherwise; a row-strided view, a column-strided one and 2*T*I >= 2^31 take FLAT=1."""
    buckets = [(bound, dict(cfg, FLAT=3, BLOCK=256)) for bound, cfg in seed.CONFIGS["by_outputs"]]
    monkeypatch.setitem(seed.CONFIGS, "by_outputs", buckets)
    cfg = seed._launch(T, I)
    assert cfg["FLAT"] == 3 and cfg["EVEN"] == int(T * I % 256 == 0)
    assert seed._launch(T, I, contiguous=False)["FLAT"] == 1
    assert seed._launch(1 << 20, 1 << 10)["FLAT"] == 1                         # 2 * T * I = 2^31
    assert seed._launch((1 << 20) - 1, 1 << 10)["FLAT"] == 3
    x = spec.make_inputs({"T": T, "I": I}, "fp32", seed=T * I + 1, device="cpu")["x"]
    view = torch.cat([x, x[:, :6]], dim=1)[:, : 2 * I]          # row stride 2I + 6: not contiguous
    col_view = x.t().contiguous().t()
    for arg in (x, view, col_view):
        assert tolerance_failures(seed.silu_and_mul(arg), spec.reference(arg), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("T, I", [(3, 256), (4, 200), (1, 37)])
def test_one_row_path_matches_reference_and_falls_back_where_it_does_not_apply(spec, seed, T, I):
    """FLAT=2: unmasked at a power-of-two I, masked otherwise, on a row-strided view too; a column stride
    other than 1 and a row wider than max_row_i take the flat launch instead."""
    assert seed._launch(T, I)["FLAT"] == 2 and seed._launch(T, I)["BLOCK_I"] == 1 << (I - 1).bit_length()
    assert seed._launch(T, I, col_stride=2)["FLAT"] == 1
    assert seed._launch(1, seed.CONFIGS["max_row_i"] + 1)["FLAT"] == 1
    x = spec.make_inputs({"T": T, "I": I}, "fp32", seed=T * I, device="cpu")["x"]
    view = torch.cat([x, x[:, :6]], dim=1)[:, : 2 * I]          # row stride 2I + 6
    col_view = x.t().contiguous().t()                          # column stride T (T > 1): the flat fallback
    for arg in (x, view, col_view):
        assert tolerance_failures(seed.silu_and_mul(arg), spec.reference(arg), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_seed_handles_strided_rows_and_columns(spec, seed, dtype):
    T, I = 3, 100
    wide = spec.make_inputs({"T": T, "I": I + 12}, dtype, seed=9, device="cpu")["x"]   # [3, 224]
    row_view = wide[:, 8:8 + 2 * I]                        # row stride 224, offset 8 elements
    assert row_view.stride() == (2 * I + 24, 1)
    col_view = wide[:, :2 * I].t().contiguous().t()       # column stride T, row stride 1
    assert col_view.stride() == (1, T)
    for x in (row_view, col_view):
        out = seed.silu_and_mul(x)
        assert tolerance_failures(out, spec.reference(x), spec.tolerance(dtype)) == []


@pytest.mark.interpreter
def test_seed_extreme_gates_give_exact_limits(seed):
    # silu(a) -> 0 for a -> -inf and -> a for a -> +inf; no NaN from exp overflow.
    x = torch.tensor([[-400.0, -90.0, 0.0, 90.0, 400.0, 2.0, 2.0, 2.0, 2.0, 2.0]])
    out = seed.silu_and_mul(x)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.tensor([[0.0, 0.0, 0.0, 180.0, 800.0]]), atol=1e-30, rtol=1e-6)


# ---- scaled-down and hold-out shapes --------------------------------------------------------

def _is_pow2(n):
    return n > 0 and n & (n - 1) == 0


@pytest.mark.parametrize("dims, expected", [
    ({"T": 8192, "I": 16384}, {"T": 4, "I": 256}),
    ({"T": 37, "I": 14336}, {"T": 3, "I": 192}),     # 14336 is not a power of two: 192 + 14336 % 64
    ({"T": 1, "I": 3001}, {"T": 1, "I": 249}),       # odd stays odd: 192 + 57
    ({"T": 2, "I": 256}, {"T": 2, "I": 256}),        # already small
])
def test_interpreter_dims(spec, dims, expected):
    assert spec.interpreter_dims(dims) == expected


HOT = [{"T": t, "I": i} for t in (1, 16, 64, 256, 1024, 8192) for i in (256, 2304, 3584, 14336)]


def test_holdout_dims(spec):
    hold = spec.module.holdout_dims(random.Random(3), HOT)
    assert 3 <= len(hold) <= 4 and all(set(d) == {"T", "I"} for d in hold)
    assert any(not _is_pow2(d["T"]) for d in hold)
    assert any(d["T"] > 8192 for d in hold)
    assert any(d["I"] % 2 == 1 for d in hold)
    assert any(d["I"] > 14336 for d in hold)
    assert hold != spec.module.holdout_dims(random.Random(4), HOT)
    for seed_ in range(20):   # every draw keeps the promises, not just seed 3
        hold = spec.module.holdout_dims(random.Random(seed_), HOT)
        assert any(d["T"] > 8192 and not _is_pow2(d["T"]) for d in hold)
        assert all(d["T"] >= 1 and d["I"] >= 1 for d in hold)


# ---- calls per forward pass -------------------------------------------------------------------

def test_occurrences_llama_8b_tp1(spec):
    # every one of the 32 layers has a dense SwiGLU MLP; I = 14336 / 1
    assert spec.module.occurrences(MODELS["llama-3.1-8b"], 1, 64) == [({"T": 64, "I": 14336}, 32)]


def test_occurrences_llama_70b_tp8(spec):
    # 80 layers, I = 28672 / 8 = 3584
    assert spec.module.occurrences(MODELS["llama-3.1-70b"], 8, 256) == [({"T": 256, "I": 3584}, 80)]


def test_occurrences_deepseek_v3_tp8(spec):
    got = {d["I"]: (d["T"], n) for d, n in spec.module.occurrences(MODELS["deepseek-v3"], 8, 16)}
    # first_k_dense_replace = 3 dense layers: I = 18432 / 8 = 2304;
    # 61 - 3 = 58 MoE layers, each with one shared expert: I = 2048 * 1 / 8 = 256
    assert got == {2304: (16, 3), 256: (16, 58)}


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b", "gpt-oss-120b"])
def test_occurrences_moe_without_shared_expert_is_empty(spec, model):
    assert spec.module.occurrences(MODELS[model], 1, 64) == []


def test_occurrences_reject_a_tp_that_does_not_divide(spec):
    with pytest.raises(ValueError, match="tp=3"):
        spec.module.occurrences(MODELS["llama-3.1-8b"], 3, 64)


# ---- compile for Hopper without a GPU ---------------------------------------------------------

COMPILE_SCRIPT = textwrap.dedent(r"""
    import importlib.util, json, os, re, subprocess, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    s = importlib.util.spec_from_file_location("seed", sys.argv[1]); m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    d16 = [["tt.divisibility", 16]]
    report = {}

    def compiled(kernel, sig, aligned, constexprs, num_warps, vector):
        # registers, local bytes, and whether the PTX has a global load matching `vector` (None: not checked);
        # USE_PDL off (tests/benchmarks/test_pdl_seeds.py builds it on)
        sig, constexprs = {**sig, "USE_PDL": "constexpr"}, {**constexprs, "USE_PDL": False}
        src = triton.compiler.ASTSource(kernel, sig, attrs={(i,): d16 for i in aligned}, constexprs=constexprs)
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(k.asm["cubin"])
        usage = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
        os.unlink(f.name)
        return {"regs": int(re.search(r"REG:(\d+)", usage).group(1)),
                "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)),
                "v4": vector is None or re.search(vector, k.asm["ptx"]) is not None}

    for T, I in ((16, 256), (64, 3584), (8192, 3584), (4, 14336), (8192, 2304)):
        for flat in (0, 1):
            cfg = m._launch(T, I)
            if cfg["FLAT"] != flat:   # the other switch value, with the tile the launcher would give it
                saved = [dict(c) for _, c in m.CONFIGS["by_outputs"]]
                for _, c in m.CONFIGS["by_outputs"]:
                    c["FLAT"] = flat
                cfg = m._launch(T, I)
                for (_, c), old in zip(m.CONFIGS["by_outputs"], saved):
                    c.clear(); c.update(old)
            sig = {"x_ptr": "*bf16", "out_ptr": "*bf16", "T": "i32", "I": "i32", "stride_x_row": "i32",
                   "stride_x_col": "constexpr", "stride_out_row": "i32", "FLAT": "constexpr", "BLOCK": "constexpr",
                   "ROWS": "constexpr", "BLOCK_I": "constexpr"}
            report[f"T={T} I={I} FLAT={flat}"] = compiled(m._silu_and_mul_kernel, sig, (0, 1, 3, 4, 6),
                {"stride_x_col": 1, "FLAT": flat, "BLOCK": cfg["BLOCK"], "ROWS": cfg["ROWS"], "BLOCK_I": cfg["BLOCK_I"]},
                cfg["num_warps"], r"ld\.global\S*\.v4\.")
    # the one-row kernel: unmasked at I = 256 (1 warp: 16-byte loads, 4 warps: 4-byte), masked at I = 200
    sig = {"x_ptr": "*bf16", "out_ptr": "*bf16", "stride_x_row": "i32", "stride_out_row": "i32",
           "I": "constexpr", "BLOCK_I": "constexpr", "WIDE": "constexpr"}
    for I, warps, vector in ((256, 1, r"ld\.global\S*\.v4\."), (256, 4, r"ld\.global\S*\.b32"), (200, 4, None)):
        report[f"row I={I} w{warps}"] = compiled(m._silu_and_mul_row_kernel, sig, (0, 1, 2, 3),
            {"I": I, "BLOCK_I": triton.next_power_of_2(I), "WIDE": False}, warps, vector)
    # the flat kernel with I a compile-time constant (FLAT=3): 16-byte loads where I is a multiple of 8
    sig = {"x_ptr": "*bf16", "out_ptr": "*bf16", "n": "i32", "I": "constexpr", "BLOCK": "constexpr", "EVEN": "constexpr",
           "EVICT": "constexpr"}
    for (T, I), evict in zip(((64, 3584), (8192, 3584), (8192, 2304)), ("evict_first", "", "evict_first")):
        cfg = m._launch(T, I)
        report[f"flat const T={T} I={I}"] = compiled(m._silu_and_mul_flat_kernel, sig, (0, 1, 2),
            {"I": I, "BLOCK": cfg["BLOCK"], "EVEN": cfg["EVEN"], "EVICT": evict}, cfg["num_warps"],
            r"ld\.global\S*\.v4\.")
    print(json.dumps(report))
""")


def test_seed_compiles_for_hopper_without_spills(spec, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    proc = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT, spec.seed_path], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report) == 16
    for I, r in report.items():
        assert r["local"] == 0, f"I={I}: {r['local']} bytes of local memory (register spills)"
        assert r["regs"] <= 128, f"I={I}: {r['regs']} registers"
        assert r["v4"], f"I={I}: no global loads of the expected width in the PTX (16 bytes, 4 for the 4-warp row)"


# ---- on the GPU -------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 37, 256, 4096])
@pytest.mark.parametrize("I", [256, 2304, 3001, 3584, 14336])
def test_seed_matches_reference_on_gpu_bf16(spec, seed, T, I):
    inputs = spec.make_inputs({"T": T, "I": I}, "bf16", seed=T + I, device="cuda")
    out = seed.silu_and_mul(**inputs)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("bf16")) == []
