"""softmax operator folder: work model by hand, fp32 output for every input dtype, logits whose
probabilities span many decades, the split seed under the interpreter, what the tolerance catches, and
the sampler's rows per phase."""
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
    return load_operator("softmax")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_softmax_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"T": 64, "V": 151936}, "bf16")
    assert W == {"fp32": 5 * 64 * 151936}
    assert Q == 64 * 151936 * (2 + 4) == 58_343_424          # bf16 read + fp32 written
    assert spec.module.work({"T": 1, "V": 10}, "fp32")[1] == 80


def test_output_is_fp32_for_every_input_dtype(spec):
    for dtype in ("bf16", "fp16", "fp32"):
        assert spec.output_spec({"T": 2, "V": 7}, dtype) == ((2, 7), "fp32")
        out = spec.reference(**spec.make_inputs({"T": 2, "V": 7}, dtype, seed=0))
        assert out.dtype == torch.float32


def test_reference_is_the_formula(spec):
    x = torch.tensor([[0.0, math.log(3.0)], [1000.0, 1000.0]])
    torch.testing.assert_close(spec.reference(x), torch.tensor([[0.25, 0.75], [0.5, 0.5]]))


def test_logits_span_many_decades(spec):
    p = spec.reference(**spec.make_inputs({"T": 8, "V": 32000}, "bf16", seed=1))
    assert (p.max(-1).values > 0.1).all()             # a few lifted tokens dominate
    assert (p.min(-1).values < 1e-12).all()           # the body's tail is tiny but not zero
    assert (p > 0).all()


@pytest.mark.interpreter
@pytest.mark.parametrize("T, V", [(1, 2500), (3, 1000), (2, 5003), (5, 17)])
def test_seed_matches_reference(spec, seed, T, V):
    inputs = spec.make_inputs({"T": T, "V": V}, "fp32", seed=T + V)
    out = seed.softmax(**inputs)
    assert out.dtype == torch.float32 and out.is_contiguous()
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_one_split_and_strided_rows(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "ONE_READ", 0)
    monkeypatch.setitem(seed.CONFIGS, "MAX_SPLITS", 1)   # the whole row in one program: the online rescale
    monkeypatch.setitem(seed.CONFIGS, "BLOCK_V", 256)
    wide = spec.make_inputs({"T": 3, "V": 3100}, "fp32", seed=2)["x"]
    x = wide[:, 50:3050]
    out = seed.softmax(x)
    assert tolerance_failures(out, spec.reference(x), spec.tolerance("fp32")) == []


def test_split_never_leaves_an_empty_chunk(seed):
    for T in (1, 3, 64, 256, 1000):
        for V in (17, 1024, 1025, 32000, 151936, 201088):
            chunk, splits = seed._split(T, V, 1024)
            assert chunk % 1024 == 0 and (splits - 1) * chunk < V <= splits * chunk


def test_tolerance_catches_fp16_probabilities(spec):
    inputs = spec.make_inputs({"T": 4, "V": 32000}, "bf16", seed=3)
    ref = spec.reference(**inputs)
    tol = spec.tolerance("bf16")
    assert tolerance_failures(ref.half().float(), ref, tol)
    assert tolerance_failures(spec.module.baseline(**inputs), ref, tol) == []


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["V"] > 201088 and d["V"] % 2 for d in hold)
        assert all(d["T"] * d["V"] * 6 < 4 << 30 for d in hold)      # input + output fit any GPU


def test_occurrences_rows_per_phase(spec):
    occ = spec.module.occurrences
    assert occ(MODELS["llama-3.1-8b"], 1, 64, "decode") == [({"T": 64, "V": 128256}, 1)]
    # logits are gathered before sampling: tp does not split V
    assert occ(MODELS["deepseek-v3"], 8, 256, "decode") == [({"T": 256, "V": 129280}, 1)]
    # a prefill chunk samples one row per 2048-token prompt, at least one
    assert occ(MODELS["qwen3-30b-a3b"], 1, 1024, "prefill") == [({"T": 1, "V": 151936}, 1)]
    assert occ(MODELS["qwen3-30b-a3b"], 1, 8192, "prefill") == [({"T": 4, "V": 151936}, 1)]


@pytest.mark.interpreter
@pytest.mark.parametrize("reverse, evict", [(1, 0), (0, 1), (1, 1)])
def test_seed_reverse_and_evict_switches(spec, seed, monkeypatch, reverse, evict):
    """REVERSE (pass 2's programs in reverse order) and PASS1_EVICT_LAST, with several splits per row and
    rows that do not fill the last chunk."""
    monkeypatch.setitem(seed.CONFIGS, "ONE_READ", 0)
    monkeypatch.setitem(seed.CONFIGS, "REVERSE", reverse)
    monkeypatch.setitem(seed.CONFIGS, "PASS1_EVICT_LAST", evict)
    monkeypatch.setitem(seed.CONFIGS, "BLOCK_V", 256)
    for T, V in ((3, 2500), (1, 1000)):
        assert seed._split(T, V, 256)[1] > 1
        inputs = spec.make_inputs({"T": T, "V": V}, "fp32", seed=T + V)
        assert tolerance_failures(seed.softmax(**inputs), spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("group, row_bytes, cs, stages", [(8, 0, 0, 1), (4, 12000, 1, 2), (8, 12000, 0, 3)])
def test_seed_grouped_max_row_groups_and_stages(spec, seed, monkeypatch, group, row_bytes, cs, stages):
    """GROUP (pass 1's per-thread max of G logits, one exp a logit), ROW_GROUP_BYTES (both passes a group of
    rows at a time: 12000 bytes is one 10000-byte fp32 row of V = 2500 a group), STORE_CS and STAGES, on rows
    split in several chunks whose last tile is partly masked."""
    for key, value in (("GROUP", group), ("ROW_GROUP_BYTES", row_bytes), ("STORE_CS", cs), ("STAGES", stages),
                       ("BLOCK_V", 256), ("ONE_READ", 0)):
        monkeypatch.setitem(seed.CONFIGS, key, value)
    for T, V in ((3, 2500), (2, 1000)):
        assert seed._split(T, V, 256)[1] > 1
        inputs = spec.make_inputs({"T": T, "V": V}, "fp32", seed=T + V + group)
        assert len(seed._row_groups(T, V * 4)) == (T if row_bytes and T * V * 4 > row_bytes else 1)
        assert tolerance_failures(seed.softmax(**inputs), spec.reference(**inputs), spec.tolerance("fp32")) == []


def test_row_groups_cover_every_row_once_within_the_limit(seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "ROW_GROUP_BYTES", 24 << 20)
    for T, row_bytes in ((256, 151936 * 2), (64, 151936 * 2), (1, 256000 * 4), (1000, 32000 * 2), (7, 30 << 20)):
        groups = seed._row_groups(T, row_bytes)
        assert groups[0][0] == 0 and groups[-1][1] == T
        assert all(a[1] == b[0] for a, b in zip(groups, groups[1:]))          # contiguous, no row twice
        assert all((r1 - r0) * row_bytes <= 24 << 20 or r1 - r0 == 1 for r0, r1 in groups)
        assert len(groups) == 1 or T * row_bytes > 24 << 20
    assert seed._row_groups(256, 151936 * 2) == [(0, 64), (64, 128), (128, 192), (192, 256)]   # <= 82 rows, equal
    monkeypatch.setitem(seed.CONFIGS, "ROW_GROUP_BYTES", 0)
    assert seed._row_groups(256, 151936 * 2) == [(0, 256)]


@pytest.mark.interpreter
@pytest.mark.parametrize("T, V", [(3, 2500), (2, 17), (1, 4096)])
def test_one_read_path_with_one_chunk_a_row(spec, seed, monkeypatch, T, V):
    """ONE_READ under the interpreter, where it runs only when a row is one chunk: the packed (max, sum) word
    published and read back, the probabilities from the registers; V = 4096 fills the chunk exactly."""
    monkeypatch.setitem(seed.CONFIGS, "ONE_READ_MIN_BLOCK", 4096)
    monkeypatch.setitem(seed.CONFIGS, "ONE_READ_MIN_BYTES", 0)
    assert seed._one_read_block(T, V) >= V
    inputs = spec.make_inputs({"T": T, "V": V}, "fp32", seed=T * V)
    assert tolerance_failures(seed.softmax(**inputs), spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("poll_loads", [0, 1])
def test_one_read_wait_that_never_ends_leaves_nan_not_a_wrong_value(spec, seed, monkeypatch, poll_loads):
    """Two chunks under the interpreter: chunk 0 runs first and waits for chunk 1, which has not started; after
    ONE_READ_MAX_SPINS rounds it gives up and its probabilities are NaN (the correctness gate fails it), while
    chunk 1, which found both words, is right. The same with the polls as volatile loads (ONE_READ_POLL_LOADS)."""
    monkeypatch.setitem(seed.CONFIGS, "ONE_READ_MAX_SPINS", 3)
    monkeypatch.setitem(seed.CONFIGS, "ONE_READ_POLL_LOADS", poll_loads)
    x = spec.make_inputs({"T": 1, "V": 3000}, "fp32", seed=4)["x"]
    y = torch.empty(1, 3000)
    seed._softmax_one_read(x, y, 2048)
    assert torch.isnan(y[0, :2048]).all()
    ref = spec.reference(x)
    assert tolerance_failures(y[:, 2048:], ref[:, 2048:], spec.tolerance("fp32")) == []


def test_one_read_block_fills_the_gpu_within_its_bounds(seed):
    for T, V in ((256, 151936), (64, 129280), (1, 151936), (4, 32000), (1, 17), (512, 256000)):
        block = seed._one_read_block(T, V)
        assert block & (block - 1) == 0 and block <= seed.CONFIGS["ONE_READ_BLOCK"]
        assert block >= min(seed.CONFIGS["ONE_READ_MIN_BLOCK"], seed.triton.next_power_of_2(V))
        if block < seed.CONFIGS["ONE_READ_BLOCK"] and block < seed.triton.next_power_of_2(V):
            assert T * -(-V // (2 * block)) < seed.CONFIGS["TARGET_PROGRAMS"]     # a larger chunk was too few
    assert seed._one_read_block(256, 151936) == seed.CONFIGS["ONE_READ_BLOCK"]
    assert seed._one_read_block(1, 151936) == seed.CONFIGS["ONE_READ_MIN_BLOCK"]



def test_one_read_kernel_compiles_for_hopper_without_spills(spec, seed):
    """Every one-read block and warp count the search can pick compiles for sm_90 with no local memory (a chunk
    lives in registers between publishing and writing: a spill would be a second read of it)."""
    from hopper_compile import compile_for_hopper
    types = {"x_ptr": "*bf16", "ws_ptr": "*i64", "y_ptr": "*fp32", "SPLITS": "i32", "max_spins": "i32"}
    compiles = [{"kernel": "_softmax_one_read_kernel", "types": types, "aligned": ["x_ptr", "ws_ptr", "y_ptr"],
                 "constexprs": {"BLOCK": block, "BLOCK_S": 64, "POLL_LOADS": poll}, "num_warps": warps,
                 "num_stages": 1}
                for block in seed.SEARCH_SPACE["ONE_READ_BLOCK"] for warps in seed.SEARCH_SPACE["ONE_READ_WARPS"]
                for poll in seed.SEARCH_SPACE["ONE_READ_POLL_LOADS"] if block // (32 * warps) <= 64]
    assert len(compiles) >= 12
    for c, r in zip(compiles, compile_for_hopper(spec.seed_path, compiles)):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c}: {r['usage']}"
        # POLL_LOADS: the wait reads the words by volatile loads, and the atomics left are the ticket and the publish
        polls = c["constexprs"]["POLL_LOADS"]
        assert (r["volatile_loads"] > 0) == bool(polls), (c, r["volatile_loads"])
        assert (r["atomics"] <= 2) == bool(polls), (c, r["atomics"])


def test_two_pass_kernels_compile_for_hopper_without_spills_at_every_step_width_the_variants_time(spec, seed):
    """The two passes at 4096- and 8192-wide steps on 8 or 16 warps (the variants `steps8192*`): pass 1 keeps a
    step's logits and its group maxima in registers, pass 2 a step's logits and probabilities; a spill would put
    a step's bytes through local memory."""
    from hopper_compile import compile_for_hopper
    compiles = []
    for block, warps in ((4096, 8), (8192, 8), (8192, 16)):
        compiles.append({"kernel": "_softmax_partials_kernel", "types": {"x_ptr": "*bf16", "part_ptr": "*fp32"},
                         "aligned": ["x_ptr", "part_ptr"], "num_warps": warps, "num_stages": 1,
                         "constexprs": {"BLOCK_V": block, "EVICT_LAST": 0, "GROUP": 8, "STAGES": 1, "USE_PDL": 0}})
        compiles.append({"kernel": "_softmax_normalize_kernel",
                         "types": {"x_ptr": "*bf16", "part_ptr": "*fp32", "y_ptr": "*fp32"},
                         "aligned": ["x_ptr", "part_ptr", "y_ptr"], "num_warps": warps, "num_stages": 1,
                         "constexprs": {"BLOCK_V": block, "BLOCK_S": 64, "REVERSE": seed.CONFIGS["REVERSE"],
                                        "STORE_CS": seed.CONFIGS["STORE_CS"], "STAGES": 1, "USE_PDL": 0}})
    for c, r in zip(compiles, compile_for_hopper(spec.seed_path, compiles)):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['kernel']} {c['constexprs']}: {r['usage']}"


@pytest.mark.gpu
def test_one_read_on_the_gpu_matches_the_reference_every_time(spec, seed, monkeypatch):
    """The wait across programs on a real GPU: hot and odd shapes, each call checked against the reference, ten
    calls a shape (a race would show as an occasional wrong or NaN row), with every shape on the one-read path
    and then with the default threshold."""
    default = seed.CONFIGS["ONE_READ_MIN_BYTES"]
    for T, V in ((256, 151936), (64, 129280), (1, 151936), (7, 32003), (300, 201088)):
        inputs = spec.make_inputs({"T": T, "V": V}, "bf16", seed=T + V, device="cuda")
        ref = spec.reference(**inputs)
        for min_bytes, poll in ((0, 0), (0, 1), (default, 0)):
            monkeypatch.setitem(seed.CONFIGS, "ONE_READ_MIN_BYTES", min_bytes)
            monkeypatch.setitem(seed.CONFIGS, "ONE_READ_POLL_LOADS", poll)
            for _ in range(10):
                out = seed.softmax(**inputs)
                assert tolerance_failures(out, ref, spec.tolerance("bf16")) == [], (T, V, min_bytes, poll)


def test_one_read_only_where_a_rows_chunks_fit_on_the_gpu_at_once(seed):
    """The wait ends only if a row's chunks can all be resident: at most one chunk an SM. The H200's 132 SMs take
    every hot row (19 chunks of 8192 at V = 151936); a vocabulary of more than sm_count chunks does not."""
    assert seed._row_fits_at_once(132, 132) and not seed._row_fits_at_once(133, 132)
    for V in (128256, 129280, 151936, 201088, 256000):
        assert seed._row_fits_at_once(-(-V // seed._one_read_block(256, V)), 132)
    assert not seed._row_fits_at_once(-(-256000 // seed.CONFIGS["ONE_READ_MIN_BLOCK"]), 16)
