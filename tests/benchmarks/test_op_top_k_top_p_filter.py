"""top_k_top_p_filter operator folder: the filter's rules by hand (ties at both cuts, disabled filters, the
renormalized nucleus), inputs with ties and well-posed nucleus boundaries, the seed's bins path (its default), key
search (bisection and multi-way) and radix select under the interpreter, their kernels' Hopper builds, and the
sampler's rows per phase."""
import math
import random
from pathlib import Path

import hopper_compile
import pytest
from op_helpers import load_seed, tolerance_failures
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())
NEG = -math.inf


@pytest.fixture(scope="module")
def spec():
    return load_operator("top_k_top_p_filter")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_top_k_top_p_filter_test")


def _run(spec, rows, ks, ps):
    return spec.reference(torch.tensor(rows), torch.tensor(ks, dtype=torch.int32), torch.tensor(ps))


def test_top_k_keeps_every_tie_at_the_cut(spec):
    out = _run(spec, [[1.0, 3.0, 2.0, 3.0, 2.0]], [2], [1.0])
    assert out.tolist() == [[NEG, 3.0, NEG, 3.0, NEG]]
    out = _run(spec, [[1.0, 3.0, 2.0, 3.0, 2.0]], [3], [1.0])          # the 3rd largest is a 2, tied: 4 kept
    assert out.tolist() == [[NEG, 3.0, 2.0, 3.0, 2.0]]
    assert _run(spec, [[1.0, 2.0]], [2], [1.0]).tolist() == [[1.0, 2.0]]  # k = V: disabled


def test_top_p_uses_the_mass_strictly_above_and_the_renormalized_softmax(spec):
    x = [0.0, math.log(2.0), math.log(5.0), math.log(2.0)]               # softmax 0.1, 0.2, 0.5, 0.2

    def kept(k, p):
        out = _run(spec, [x], [k], [p])
        assert torch.equal(out[torch.isfinite(out)], torch.tensor([x])[torch.isfinite(out)])   # exact copies
        return torch.isfinite(out)[0].tolist()
    # mass above: 0.4 for the 0.1 entry, 0.5 for the two tied 0.2s, 0 for 0.5
    assert kept(4, 0.5) == [False, False, True, False]
    assert kept(4, 0.51) == [False, True, True, True]
    assert kept(4, 0.01) == [False, False, True, False]                  # the largest always stays
    # after top-k (k=2 keeps 0.5 and 0.2 twice: renormalized 5/9, 2/9, 2/9) the tied 0.2s have 5/9 above
    assert kept(2, 0.55) == [False, False, True, False]
    assert kept(2, 0.56) == [False, True, True, True]


def test_inputs_have_ties_and_safe_boundaries(spec):
    inputs = spec.make_inputs({"B": 10, "V": 5000}, "bf16", seed=3)
    x, k, p = inputs["logits"], inputs["k"], inputs["p"]
    assert x.dtype == torch.float32 and k.dtype == torch.int32 and p.dtype == torch.float32
    assert torch.equal(x, x.to(torch.bfloat16).float())                 # bf16 values: ties
    assert (k == 5000).any() and (k == 1).any() and (p == 1.0).any() and (p < 1.0).any()
    desc = x.sort(-1, descending=True).values
    kk = k.long()
    straddle = [desc[b, kk[b] - 1] == desc[b, kk[b]] for b in range(10) if kk[b] < 5000]
    assert any(straddle), "no row cuts its top-k inside a tie"
    keep_k, above = spec.module._masks(x.double(), k)
    for b in range(10):                                                  # no kept entry near the nucleus cut
        if p[b] < 1:
            gap = (above[b][keep_k[b]] - p[b].double()).abs().min()
            assert gap >= spec.module.P_MARGIN_MASS / 2 - 1e-6


def test_output_spec_and_work(spec):
    assert spec.output_spec({"B": 3, "V": 10}, "bf16") == ((3, 10), "fp32")
    W, Q = spec.module.work({"B": 64, "V": 151936}, "bf16")
    assert W == {"fp32": 4 * 64 * 151936} and Q == 8 * 64 * 151936 + 8 * 64


@pytest.mark.interpreter
@pytest.mark.parametrize("B, V, s", [(5, 1200, 1), (5, 1263, 2), (3, 17, 3), (1, 2048, 4)])
def test_seed_matches_reference_exactly(spec, seed, B, V, s):
    inputs = spec.make_inputs({"B": B, "V": V}, "fp32", seed=s)
    out = seed.top_k_top_p_filter(**inputs)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
@pytest.mark.parametrize("ways, block", [(2, 1024), (4, 256), (16, 512), (32, 128)])
def test_every_split_of_the_key_search_finds_the_same_exact_thresholds(spec, seed, ways, block, monkeypatch):
    """WAYS=2 is bisection (32 passes per threshold), 16 splits the key interval 16 ways (8 passes): the same
    thresholds either way, at sizes that are not multiples of the block."""
    monkeypatch.setitem(seed.CONFIGS, "BIN_PATH", 0)
    monkeypatch.setitem(seed.CONFIGS, "SPLIT_MAX_B", 0)               # the one-program kernel these settings steer
    monkeypatch.setitem(seed.CONFIGS, "WAYS", ways)
    monkeypatch.setitem(seed.CONFIGS, "BLOCK_V", block)
    assert seed._passes(ways) == -(-32 // (ways.bit_length() - 1))
    for s, (B, V) in enumerate([(4, 1263), (3, 600)]):
        inputs = spec.make_inputs({"B": B, "V": V}, "fp32", seed=10 + s)
        out = seed.top_k_top_p_filter(**inputs)
        assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_on_negative_logits_and_hand_cases(spec, seed):
    x = torch.tensor([[-3.0, -1.0, -2.0, -1.0, -5.0], [0.0, math.log(2.0), math.log(5.0), math.log(2.0), -9.0]])
    k = torch.tensor([2, 3], dtype=torch.int32)
    p = torch.tensor([1.0, 0.56])
    assert tolerance_failures(seed.top_k_top_p_filter(x, k, p), spec.reference(x, k, p), spec.tolerance("fp32")) == []


def test_a_filter_that_ignores_ties_fails(spec):
    inputs = spec.make_inputs({"B": 10, "V": 5000}, "bf16", seed=3)
    x, k, p = inputs["logits"], inputs["k"], torch.ones(10)
    ref = spec.reference(x, k, p)
    exactly_k = torch.full_like(x, NEG)
    for b in range(10):
        top = x[b].topk(int(k[b])).indices
        exactly_k[b, top] = x[b, top]
    assert tolerance_failures(exactly_k, ref, spec.tolerance("fp32"))
    for s in (3, 4, 5):                            # the baseline's fp32 decides every row as the float64 reference
        inputs = spec.make_inputs({"B": 10, "V": 5000}, "bf16", seed=s)
        out = spec.module.baseline(**inputs)
        assert out.dtype == torch.float32
        assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["V"] > max(h["V"] for h in hot) for d in hold)


def test_occurrences(spec):
    occ = spec.module.occurrences
    assert occ(MODELS["gpt-oss-120b"], 1, 256, "decode") == [({"B": 256, "V": 201088}, 1)]
    assert occ(MODELS["command-r7b"], 1, 4096, "prefill") == [({"B": 2, "V": 256000}, 1)]


def _independent_filters(x: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """The common mistake: the nucleus measured under the softmax of the whole row, then intersected with top-k."""
    x64 = x.double()
    V = x.shape[-1]
    t_k = x64.sort(-1, descending=True).values.gather(1, (k.long().clamp(1, V) - 1)[:, None])
    q = torch.softmax(x64, -1)
    above = torch.stack([(q[b][None, :] * (x64[b][None, :] > x64[b][:, None])).sum(-1) for b in range(x.shape[0])])
    keep = (x64 >= t_k) & ((above < p.double()[:, None]) | (p.double()[:, None] >= 1))
    return torch.where(keep, x, torch.full_like(x, NEG))


@pytest.mark.parametrize("B", [2, 3, 7])
def test_every_call_has_interacting_filters_and_a_tie_at_the_cut(spec, B):
    """At any B >= 2, each call tells sequential filters from independent ones and has a top-k cut inside a tie:
    the hot shapes have B=2, so a row setting that only some calls draw would let a wrong kernel pass by luck."""
    rows_hit = set()
    for seed in range(12):
        inp = spec.make_inputs({"B": B, "V": 600}, "fp32", seed=seed)
        x, k, p = inp["logits"], inp["k"], inp["p"]
        ref = spec.reference(x, k, p)
        differs = (ref != _independent_filters(x, k, p)).any(-1)
        assert differs.any(), f"seed {seed}: no row whose filters interact"
        rows_hit |= set(differs.nonzero().flatten().tolist())
        desc = x.sort(-1, descending=True).values
        kk = k.long()
        assert any(kk[b] < 600 and desc[b, kk[b] - 1] == desc[b, kk[b]] for b in range(B)), f"seed {seed}: no tie at a cut"
    assert len(rows_hit) > 1, "the interacting row is always the same row"


# ---- the split-row path (small B: a (B, N) grid, one launch per pass) -------------------------------------------

def _split_config(seed, monkeypatch, splits, block, ways=16):
    monkeypatch.setitem(seed.CONFIGS, "BIN_PATH", 0)                  # the key-search paths, not the bins path
    monkeypatch.setitem(seed.CONFIGS, "SPLITS", splits)
    monkeypatch.setitem(seed.CONFIGS, "SPLIT_BLOCK_V", block)
    monkeypatch.setitem(seed.CONFIGS, "SPLIT_WAYS", ways)


def test_the_split_path_is_chosen_from_b_and_its_chunks_are_capped(seed, monkeypatch):
    cfg = seed.CONFIGS
    n, ch = seed._split_chunks(64, 151936)                         # B = 64: programs // B chunks a row
    assert n * ch >= 151936 > (n - 1) * ch and n <= cfg["SPLIT_PROGRAMS"] // 64
    n, ch = seed._split_chunks(256, 151936)                        # B = 256: LARGE_B's chunks, whole tiles
    assert n * ch >= 151936 > (n - 1) * ch and cfg["LARGE_B"]["SPLITS"] // 2 < n <= cfg["LARGE_B"]["SPLITS"]
    assert cfg["LARGE_B_MIN"] == 256 and seed._split_chunks(255, 151936)[0] <= cfg["SPLIT_PROGRAMS"] // 255
    monkeypatch.setitem(cfg, "LARGE_B_MIN", 0)                     # off: B = 256 back on programs // B
    assert seed._split_chunks(256, 151936)[0] <= cfg["SPLIT_PROGRAMS"] // 256
    n, ch = seed._split_chunks(2, 151936)
    assert n * ch >= 151936 > (n - 1) * ch and ch % cfg["SPLIT_BLOCK_V"] == 0
    assert n <= cfg["SPLIT_MAX_CHUNKS"] < cfg["SPLIT_PROGRAMS"] // 2          # B = 2: the cap, not programs // B
    monkeypatch.setitem(cfg, "SPLIT_MAX_CHUNKS", 0)
    assert seed._split_chunks(2, 151936)[0] > cfg["SPLIT_PROGRAMS"] // 2 // 2  # uncapped: many more chunks
    monkeypatch.setitem(cfg, "SPLIT_MAX_B", 32)
    assert seed._split_chunks(64, 151936) is None                  # above SPLIT_MAX_B: one program per row
    assert seed._split_chunks(16, 129280)[0] >= 2
    assert seed._split_chunks(2, 300) is None                      # one tile: nothing to split
    monkeypatch.setitem(seed.CONFIGS, "SPLITS", 7)
    assert seed._split_chunks(1, 7 * 512 - 5) == (7, 512)          # N that does not divide V
    monkeypatch.setitem(seed.CONFIGS, "SPLIT_MAX_B", 0)
    assert seed._split_chunks(1, 151936) is None


def test_split_settings_take_many_rows_then_large_b_entries_by_b(seed, monkeypatch):
    """MANY_ROWS (4 ways a pass) from 64 rows, LARGE_B's chunks over it from 256; fewer rows keep the table."""
    cfg = seed.CONFIGS
    assert seed._split_settings(2)["SPLIT_WAYS"] == cfg["SPLIT_WAYS"] == 16
    assert seed._split_settings(63)["SPLIT_WAYS"] == 16
    assert seed._split_settings(64)["SPLIT_WAYS"] == cfg["MANY_ROWS"]["SPLIT_WAYS"] == 4
    large = seed._split_settings(256)
    assert large["SPLIT_WAYS"] == 4 and large["SPLITS"] == cfg["LARGE_B"]["SPLITS"]
    assert seed._split_settings(64)["SPLITS"] == cfg["SPLITS"]
    monkeypatch.setitem(cfg, "MANY_ROWS_MIN_B", 0)                 # off: 16 ways at every B
    assert seed._split_settings(256)["SPLIT_WAYS"] == 16
    assert cfg["SPLIT_WAYS"] == 16, "the settings of a call must not edit CONFIGS"


@pytest.mark.interpreter
@pytest.mark.parametrize("B, V, s, splits, block, ways", [
    (2, 1263, 1, 5, 64, 16),        # 5 chunks of 256, the last one short
    (3, 600, 2, 3, 128, 16),
    (1, 1000, 3, 7, 32, 16),        # 7 chunks of 160 (not a power of 2), the last short
    (1, 1100, 4, 40, 16, 16),       # 35 chunks: partials summed in two rounds of _RED
    (2, 1263, 5, 4, 64, 2),         # bisection and other splits of the key interval
    (2, 777, 6, 6, 32, 4),
    (3, 1100, 7, 9, 32, 32),
])
@pytest.mark.parametrize("radix", [0, 1], ids=["search", "radix"])
def test_split_path_matches_reference_exactly(spec, seed, monkeypatch, B, V, s, splits, block, ways, radix):
    """radix=1: t_k by radix select (TOPK_RADIX), top-p's search as before; the same bytes either way."""
    _split_config(seed, monkeypatch, splits, block, ways)
    monkeypatch.setitem(seed.CONFIGS, "TOPK_RADIX", radix)
    assert seed._split_chunks(B, V)[0] >= 2
    inputs = spec.make_inputs({"B": B, "V": V}, "fp32", seed=s)
    out = seed.top_k_top_p_filter(**inputs)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []
    monkeypatch.setitem(seed.CONFIGS, "SPLIT_MAX_B", 0)             # the one-program path: the same bytes
    assert torch.equal(seed.top_k_top_p_filter(**inputs), out)


def _hand_rows(V: int):
    """Rows with ties at both cuts, k = V (and above), p = 1, tiny p, -inf entries, all-negative logits."""
    g = torch.Generator().manual_seed(0)
    base = (3.0 * torch.randn(6, V, generator=g)).to(torch.bfloat16).float()
    x = base.clone()
    x[0, 5:40] = 15.0                                 # a 35-way tie at the top: k = 10 cuts inside it
    x[1, ::3] = NEG                                   # -inf entries, top-k wider than the finite ones
    x[2] = -x[2].abs() - 1.0                          # every logit negative
    x[3, 100:103] = 20.0                              # the maximum tied 3 ways, p tiny
    x[4, ::7] = NEG
    x[5, :] = 0.5                                     # one value everywhere
    x[5, V - 1] = 2.0
    k = torch.tensor([10, V, 7, 50, V + 9, 3], dtype=torch.int32)
    p = torch.tensor([1.0, 1.0, 0.999999, 1e-6, 0.7, 0.9])
    return x, k, p


@pytest.mark.interpreter
@pytest.mark.parametrize("splits, block, local, radix", [(4, 128, 0, 0), (9, 64, 1, 0), (4, 128, 0, 1), (9, 64, 1, 1)])
def test_split_path_on_hand_cases(spec, seed, monkeypatch, splits, block, local, radix):
    """Ties at both cuts and the other hand rows, on the split path; with local=1 the counters and masses are kept
    per thread over the chunk (LOCAL_ACC) and summed once after its loop; radix=1 takes t_k by radix select
    (a 35-way tie at the top cut by k = 10, -inf entries, k above V, one value everywhere)."""
    V = 1030
    _split_config(seed, monkeypatch, splits, block)
    monkeypatch.setitem(seed.CONFIGS, "LOCAL_ACC", local)
    monkeypatch.setitem(seed.CONFIGS, "TOPK_RADIX", radix)
    x, k, p = _hand_rows(V)
    ref = spec.reference(x, k.clamp(max=V), p)
    assert torch.isfinite(ref[0]).sum() == 35 and torch.isfinite(ref[3]).sum() == 3    # the ties stay together
    for rows in ([0, 1, 2], [3, 4], [5]):
        out = seed.top_k_top_p_filter(x[rows].contiguous(), k[rows].contiguous(), p[rows].contiguous())
        assert tolerance_failures(out, ref[rows], spec.tolerance("fp32")) == [], rows
    # the margins of the p < 1 rows: no kept entry has its mass above within 1e-4 of p
    keep_k, above = spec.module._masks(x.double(), k.clamp(max=V))
    for b in (2, 4, 5):
        assert (above[b][keep_k[b]] - p[b].double()).abs().min() > 1e-4


@pytest.mark.interpreter
def test_large_batches_take_their_own_split_settings(spec, seed, monkeypatch):
    """From LARGE_B_MIN rows LARGE_B's chunks and LOCAL_ACC replace the table's (here 2 rows: 5 chunks, the
    masses summed a tile at a time); one row below it keeps the table's 3 chunks with LOCAL_ACC."""
    _split_config(seed, monkeypatch, 3, 64)
    monkeypatch.setitem(seed.CONFIGS, "LOCAL_ACC", 1)
    monkeypatch.setitem(seed.CONFIGS, "LARGE_B_MIN", 2)
    monkeypatch.setitem(seed.CONFIGS, "LARGE_B", {"SPLITS": 5, "LOCAL_ACC": 0})
    assert seed._split_chunks(2, 1263)[0] == 5 and seed._split_chunks(1, 1263)[0] == 3
    assert seed._split_settings(2)["LOCAL_ACC"] == 0 and seed._split_settings(1)["LOCAL_ACC"] == 1
    inputs = spec.make_inputs({"B": 2, "V": 1263}, "fp32", seed=9)
    ref = spec.reference(**inputs)
    assert tolerance_failures(seed.top_k_top_p_filter(**inputs), ref, spec.tolerance("fp32")) == []
    one = {"logits": inputs["logits"][1:].contiguous(), "k": inputs["k"][1:].contiguous(),
           "p": inputs["p"][1:].contiguous()}
    assert tolerance_failures(seed.top_k_top_p_filter(**one), ref[1:], spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_split_path_on_a_strided_input(spec, seed, monkeypatch):
    _split_config(seed, monkeypatch, 3, 128)
    inputs = spec.make_inputs({"B": 2, "V": 700}, "fp32", seed=8)
    wide = torch.full((2, 800), 123.0)
    wide[:, :700] = inputs["logits"]
    out = seed.top_k_top_p_filter(wide[:, :700], inputs["k"], inputs["p"])
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


def test_the_seed_variants_steer_the_bins_path():
    """search_paths restores the key-search paths; the bins variants change the bins path's chunks or settings."""
    from agent.studies import seed_variants as sv
    module = sv.load_seed(load_operator("top_k_top_p_filter"))
    assert sv.check_variants("top_k_top_p_filter", module.CONFIGS) == []
    named = dict(sv.VARIANTS["top_k_top_p_filter"])
    assert module.CONFIGS["BIN_PATH"] == 1 and sv.edited(module.CONFIGS, named["search_paths"])["BIN_PATH"] == 0
    chunks = {}
    for name, overrides in named.items():
        saved = module.CONFIGS
        module.CONFIGS = sv.edited(saved, overrides)
        try:
            chunks[name] = {B: module._bins_chunks(B, 151936) for B in (2, 64, 256)}
        finally:
            module.CONFIGS = saved
    seed_chunks = {B: module._bins_chunks(B, 151936) for B in (2, 64, 256)}
    for B, (n, ch) in seed_chunks.items():                          # whole tiles covering the row, at most the cap
        assert n * ch >= 151936 > (n - 1) * ch and ch % module.CONFIGS["BIN_BLOCK_V"] == 0
        assert n <= min(module.CONFIGS["BIN_MAX_CHUNKS"], module.CONFIGS["BIN_PROGRAMS"] // B)
    assert chunks["bins_chunks16"][2][0] <= 16 < seed_chunks[2][0]
    assert chunks["bins_programs2112"][64][0] == 2 * seed_chunks[64][0]
    assert chunks["bins_tile2048_w8"][256][1] % 2048 == 0 and chunks["bins_tile512"][2][1] % 512 == 0


SEEDED_ROWS_SETTINGS = ("spill", "wide_sort")


@pytest.mark.interpreter
@pytest.mark.parametrize("settings", [
    dict(BIN_BLOCK_V=16, BIN_SEARCH_BLOCK=32, BIN_PREFETCH=0),          # many tiles a chunk: the anchor moves
    dict(BIN_BLOCK_V=32, BIN_COUNT=64, BIN_SCALE=4, BIN_CAP=40, BIN_SEARCH_BLOCK=16, BIN_RED=2),   # rows spill
    # a window of half a unit (most entries in the last bin), the search by bisection
    dict(BIN_BLOCK_V=64, BIN_COUNT=32, BIN_SCALE=64, BIN_SEARCH_WAYS=2),
    dict(BIN_BLOCK_V=16, BIN_SEARCH_BLOCK=32, BIN_PREFETCH=1),          # the next tile loaded ahead, chunks' ends
    # rows by the first sort, the second (BIN_SORT_MAX) or the search
    dict(BIN_BLOCK_V=64, BIN_PREFETCH=0, BIN_SEARCH_BLOCK=16, BIN_SORT_MAX=64),
], ids=["anchor_moves", "spill", "narrow_window", "prefetch", "wide_sort"])
def test_the_bins_path_on_hand_and_seeded_rows(spec, seed, monkeypatch, settings, request):
    """The bins path against the reference: ties at both cuts, -inf entries, k above V, p tiny and p near 1, one
    value everywhere, logits beyond the bins' exact range (x 1e6: searched whole) and a row of -inf."""
    for name, value in settings.items():
        monkeypatch.setitem(seed.CONFIGS, name, value)
    V = 1030
    x, k, p = _hand_rows(V)
    x = torch.cat([x, x[:1] * 1e6, torch.full_like(x[:1], NEG)])
    k = torch.cat([k, torch.tensor([20, 5], dtype=torch.int32)])
    p = torch.cat([p, torch.tensor([0.8, 0.5])])
    ref = spec.reference(x, k.clamp(max=V), p)
    out = seed.top_k_top_p_filter(x, k, p)
    assert [b for b in range(len(x)) if not torch.equal(out[b], ref[b])] == []
    # Four seeded rows (every draw has a row whose filters interact and a tie at a top-k cut), not seven: the call
    # costs about 3.5 s a row under the interpreter (chunks per row capped at 20 either way); narrow_window's test
    # took 57 s with seven rows and 38 s with four, in one process on this 2-core machine. Only under two of the
    # settings (the rows that spill, and the one-tile sorts): the hand rows above carry the others, and the four
    # seeded rows under all five took a minute of the suite's 15 (session 37)
    if request.node.callspec.id not in SEEDED_ROWS_SETTINGS:
        return
    inputs = spec.make_inputs({"B": 4, "V": 1263}, "fp32", seed=3)
    assert tolerance_failures(seed.top_k_top_p_filter(**inputs), spec.reference(**inputs), spec.tolerance("fp32")) == []


def _undecided_counts(seed, x, k, p, tight: int) -> torch.Tensor:
    """The bins path's stats and decide launched as _bins_filter launches them: each row's undecided entries."""
    B, V = x.shape
    cfg = seed.CONFIGS
    N, CH = seed._bins_chunks(B, V)
    nb, scale = cfg["BIN_COUNT"], float(cfg["BIN_SCALE"])
    m, z = torch.empty(B * N), torch.empty(B * N)
    a, low, off = (torch.empty(B * N, dtype=torch.int32) for _ in range(3))
    h, dec = torch.empty(B * N * nb, dtype=torch.int32), torch.empty(B * 8, dtype=torch.int32)
    seed._bins_stats_kernel[(B, N)](x, V, x.stride(0), CH, N, m, z, a, low, h, BLOCK_V=cfg["BIN_BLOCK_V"], NB=nb,
                                    SCALE=scale)
    seed._bins_decide_kernel[(B,)](k, p, V, N, m, z, a, low, h, dec, off, cfg["BIN_CAP"], RED=cfg["BIN_RED"], NB=nb,
                                   SCALE=scale, TIGHT=tight)
    return dec.view(B, 8)[:, 6]


@pytest.mark.interpreter
def test_tight_bounds_leave_fewer_undecided_entries_where_top_k_is_off(spec, seed, monkeypatch):
    """TIGHT bounds each side's mass by Z less the other side's (top-k off): never more undecided entries, fewer
    at p = 0.95-0.2 (a side's mass known within a bin's spread of the side holding less), the same where
    top-k is on; the filter stays exact."""
    monkeypatch.setitem(seed.CONFIGS, "BIN_BLOCK_V", 256)
    g = torch.Generator().manual_seed(5)
    V = 3000
    x = (3.0 * torch.randn(6, V, generator=g)).to(torch.bfloat16).float()
    k = torch.tensor([V, V, V, V, 40, 40], dtype=torch.int32)
    p = torch.tensor([0.8, 0.95, 0.5, 0.2, 0.8, 1.0])
    loose, tight = (_undecided_counts(seed, x, k, p, t) for t in (0, 1))
    assert (tight <= loose).all(), (loose, tight)
    assert (tight[:4] < loose[:4]).all() and torch.equal(tight[4:], loose[4:]), (loose, tight)
    # exact with the loose bounds too (the seed's tight ones are checked by every other bins test)
    monkeypatch.setitem(seed.CONFIGS, "BIN_TIGHT", 0)
    assert torch.equal(seed.top_k_top_p_filter(x, k, p), spec.reference(x, k, p))


@pytest.mark.interpreter
def test_the_bins_path_on_a_strided_input(spec, seed, monkeypatch):
    monkeypatch.setitem(seed.CONFIGS, "BIN_BLOCK_V", 64)
    inputs = spec.make_inputs({"B": 3, "V": 700}, "fp32", seed=8)
    wide = torch.full((3, 800), 123.0)
    wide[:, :700] = inputs["logits"]
    out = seed.top_k_top_p_filter(wide[:, :700], inputs["k"], inputs["p"])
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.slow
def test_the_bins_kernels_build_for_hopper_without_spills(spec, seed):
    """The four kernels at the committed settings: no stack or local memory, and the two reads of the logits in
    16-byte loads (the chunk length and V are multiples of 16 at every hot shape, as Triton specializes them)."""
    cfg = seed.CONFIGS
    types = {"x_ptr": "*fp32", "y_ptr": "*fp32", "k_ptr": "*i32", "p_ptr": "*fp32", "m_ptr": "*fp32", "z_ptr": "*fp32",
             "a_ptr": "*i32", "l_ptr": "*i32", "h_ptr": "*i32", "dec_ptr": "*i32", "off_ptr": "*i32", "s_ptr": "*fp32",
             "bv_ptr": "*fp32", "bi_ptr": "*i32"}
    bins = dict(NB=cfg["BIN_COUNT"], SCALE=float(cfg["BIN_SCALE"]), USE_PDL=True)
    reads = dict(BLOCK_V=cfg["BIN_BLOCK_V"], PREFETCH=cfg["BIN_PREFETCH"], **bins)
    aligned = ["x_ptr", "y_ptr", "CH", "V", "stride_x", "stride_y"]
    compiles = [
        {"kernel": "_bins_stats_kernel", "constexprs": reads,
         "num_warps": cfg["BIN_num_warps"]},
        {"kernel": "_bins_decide_kernel", "constexprs": dict(RED=cfg["BIN_RED"], TIGHT=cfg["BIN_TIGHT"], **bins),
         "num_warps": cfg["BIN_DECIDE_num_warps"]},
        {"kernel": "_bins_write_kernel", "constexprs": reads,
         "num_warps": cfg["BIN_num_warps"]},
        {"kernel": "_bins_search_kernel", "constexprs": dict(BLOCK=cfg["BIN_SEARCH_BLOCK"], WAYS=cfg["BIN_SEARCH_WAYS"],
                                                             RED=seed._RED, SORT_MAX=cfg["BIN_SORT_MAX"], **bins),
         "num_warps": cfg["BIN_SEARCH_num_warps"]}]
    flipped = 1 - cfg["BIN_PREFETCH"]       # both ways of the reads' prefetch, a wide second sort of 4096
    compiles += [dict(compiles[i], constexprs=dict(compiles[i]["constexprs"], PREFETCH=flipped)) for i in (0, 2)]
    compiles += [dict(compiles[3], constexprs=dict(compiles[3]["constexprs"], SORT_MAX=4096))]
    for c in compiles:
        c.update(types=types, aligned=aligned, num_stages=3)
    results = hopper_compile.compile_for_hopper(spec.seed_path, compiles)
    for c, r in zip(compiles, results):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['kernel']}: {r['usage']}"
    for r in (results[0], results[2], results[4], results[5]):
        assert r["load_forms"].get("ld.global.v4.b32", 0) >= 1, r


def _variant_names() -> list[str]:
    from agent.studies import seed_variants as sv
    return [name for name, _ in sv.VARIANTS["top_k_top_p_filter"]]


# One test a variant: 22 of them took 76 s as one test, the longest in the suite, left to one pytest-xdist worker
@pytest.mark.interpreter
@pytest.mark.parametrize("name", _variant_names())
def test_the_seed_variants_are_exact_at_an_interpreter_shape(spec, name):
    from agent.studies import seed_variants as sv
    module = sv.load_seed(spec)
    inputs = spec.make_inputs({"B": 2, "V": 1100}, "fp32", seed=12)
    ref = spec.reference(**inputs)
    out = sv.seed_variant(module, dict(sv.VARIANTS["top_k_top_p_filter"])[name])(**inputs)
    assert tolerance_failures(out, ref, spec.tolerance("fp32")) == [], name


@pytest.mark.interpreter
# Two settings: each of LOCAL_ACC and TOPK_RADIX on and off once, and a small block whose last split holds only
# the ragged tile (V = 1030: 17 tiles of 64, 5 splits of 4, 4, 4, 4, 1). The cost is the splits times the tiles
# under the interpreter, not the switches: 9 splits of 64 took 48-77 s of a suite that must stay under 15 minutes
# on 2 cores; 5 splits cover the same cases.
@pytest.mark.parametrize("splits, block, local, radix", [(4, 128, 0, 1), (5, 64, 1, 0)])
def test_tile_skip_gives_the_same_bytes(spec, seed, monkeypatch, splits, block, local, radix):
    """TILE_SKIP: tiles below t_k or the cuts, and rows with p >= 1, skipped in the top-p passes and read as
    -inf by the write pass; the hand rows (ties at both cuts, -inf entries, k above V) and seeded ones."""
    V = 1030
    _split_config(seed, monkeypatch, splits, block)
    monkeypatch.setitem(seed.CONFIGS, "LOCAL_ACC", local)
    monkeypatch.setitem(seed.CONFIGS, "TOPK_RADIX", radix)
    x, k, p = _hand_rows(V)
    seeded = {n: t[:3] for n, t in spec.make_inputs({"B": 5, "V": V}, "fp32", seed=8).items()}
    hand = [(x[rows].contiguous(), k[rows].contiguous(), p[rows].contiguous()) for rows in ([0, 1, 2], [3, 4, 5])]
    for inputs in hand + [(seeded["logits"], seeded["k"], seeded["p"])]:      # each set once: the interpreter's cost
        monkeypatch.setitem(seed.CONFIGS, "TILE_SKIP", 0)
        every_tile = seed.top_k_top_p_filter(*inputs)
        monkeypatch.setitem(seed.CONFIGS, "TILE_SKIP", 1)
        skipped = seed.top_k_top_p_filter(*inputs)
        assert torch.equal(skipped, every_tile), inputs[1]
    # the seeded rows' call with TILE_SKIP on, against the reference
    assert tolerance_failures(skipped, spec.reference(**seeded), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_radix_select_finds_the_kth_key_where_keys_share_their_high_bytes(spec, seed, monkeypatch):
    """Logits one ulp apart (every key shares its top two bytes with the others, so the low bytes decide) and
    values on both sides of zero (the sign bit's flip orders negative keys below positive ones)."""
    _split_config(seed, monkeypatch, 3, 64)
    monkeypatch.setitem(seed.CONFIGS, "TOPK_RADIX", 1)
    V = 300
    near = torch.tensor([float(x) for x in (1.0 + torch.arange(V) * 2 ** -23)])        # 1.0, 1.0 + ulp, ...
    mixed = torch.linspace(-3.0, 3.0, V)[torch.randperm(V, generator=torch.Generator().manual_seed(1))]
    x = torch.stack([near, mixed])
    k = torch.tensor([17, 151], dtype=torch.int32)
    p = torch.ones(2)
    out = seed.top_k_top_p_filter(x, k, p)
    assert tolerance_failures(out, spec.reference(x, k, p), spec.tolerance("fp32")) == []
    assert [int(torch.isfinite(r).sum()) for r in out] == [17, 151]


@pytest.mark.slow
def test_the_radix_kernels_build_for_hopper_without_spills(spec, seed):
    """Every radix pass (the first, a later one, and top-p's first, which finishes the last byte) at the split
    path's tile and warps, for both tables' ways: no stack, no local memory (the [RED, 256] partial sums)."""
    cfg = seed.CONFIGS
    topk = {"x_ptr": "*fp32", "k_ptr": "*i32", "mx_ptr": "*fp32", "h_in": "*i32", "h_out": "*i32", "st_in": "*i32",
            "st_out": "*i32", "tmx_ptr": "*fp32"}
    topp = {"x_ptr": "*fp32", "k_ptr": "*i32", "p_ptr": "*fp32", "mx_ptr": "*fp32", "z_ptr": "*fp32", "cnt_in": "*i32",
            "acc_in": "*fp32", "acc_out": "*fp32", "st_in": "*i32", "st_out": "*i32", "tmx_ptr": "*fp32"}
    block, warps = cfg["SPLIT_BLOCK_V"], cfg["SPLIT_num_warps"]
    compiles = [{"kernel": "_split_topk_radix_kernel", "types": topk, "aligned": list(topk), "num_warps": warps,
                 "num_stages": 1, "constexprs": dict(BLOCK_V=block, BINS=seed._RADIX_BINS, RED=seed._RED,
                                                     SHIFT=shift, FIRST=shift == 24)} for shift in (24, 16)]
    for ways in sorted({cfg["SPLIT_WAYS"], cfg["MANY_ROWS"]["SPLIT_WAYS"]}):
        for local in (0, 1):
            compiles.append({"kernel": "_split_topp_kernel", "types": topp, "aligned": list(topp), "num_warps": warps,
                             "num_stages": 1, "constexprs": dict(BLOCK_V=block, WAYS=ways, RED=seed._RED, FIRST=True,
                                                                 LOCAL_ACC=local, RADIX=1, BINS=seed._RADIX_BINS)})
    # TILE_SKIP's top-p pass (its tiles under a branch) at the many-rows table's ways
    compiles.append({"kernel": "_split_topp_kernel", "types": topp, "aligned": list(topp), "num_warps": warps,
                     "num_stages": 1, "constexprs": dict(BLOCK_V=block, WAYS=cfg["MANY_ROWS"]["SPLIT_WAYS"],
                                                         RED=seed._RED, FIRST=False, LOCAL_ACC=1, TILE_SKIP=True)})
    results = hopper_compile.compile_for_hopper(spec.seed_path, compiles)
    assert len(results) == len(compiles)
    for c, r in zip(compiles, results):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['kernel']} {c['constexprs']}: {r['usage']}"


# ---- on the GPU ----------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dims", [{"B": 256, "V": 129280}, {"B": 64, "V": 151936}, {"B": 100, "V": 50021},
                                  {"B": 2, "V": 151936}, {"B": 3, "V": 2000}])
def test_seed_matches_reference_exactly_on_the_gpu(spec, seed, dims):
    """Both sides of MANY_ROWS_MIN_B and LARGE_B_MIN at real vocabularies, and odd sizes: the same bytes as the
    reference (kept logits copied, the rest -inf), three calls in a row giving the same output."""
    inputs = spec.make_inputs(dims, "bf16", seed=4, device="cuda")       # bf16 values in fp32, as the hot shapes
    out = seed.top_k_top_p_filter(**inputs)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("bf16")) == []
    for _ in range(2):
        assert torch.equal(seed.top_k_top_p_filter(**inputs), out)


@pytest.mark.gpu
@pytest.mark.parametrize("dims", [{"B": 256, "V": 129280}, {"B": 64, "V": 151936}, {"B": 2, "V": 151936},
                                  {"B": 3, "V": 2000}])
def test_radix_top_k_gives_the_searchs_bytes_on_the_gpu(spec, seed, dims, monkeypatch):
    inputs = spec.make_inputs(dims, "bf16", seed=5, device="cuda")
    monkeypatch.setitem(seed.CONFIGS, "BIN_PATH", 0)
    monkeypatch.setitem(seed.CONFIGS, "TOPK_RADIX", 0)              # the search at every B (MANY_ROWS too)
    monkeypatch.setitem(seed.CONFIGS, "MANY_ROWS", {**seed.CONFIGS["MANY_ROWS"], "TOPK_RADIX": 0})
    by_search = seed.top_k_top_p_filter(**inputs)
    monkeypatch.setitem(seed.CONFIGS, "TOPK_RADIX", 1)
    monkeypatch.setitem(seed.CONFIGS, "MANY_ROWS", {**seed.CONFIGS["MANY_ROWS"], "TOPK_RADIX": 1})
    assert torch.equal(seed.top_k_top_p_filter(**inputs), by_search)
    assert tolerance_failures(by_search, spec.reference(**inputs), spec.tolerance("bf16")) == []


@pytest.mark.gpu
@pytest.mark.parametrize("dims", [{"B": 256, "V": 151936}, {"B": 64, "V": 129280}, {"B": 2, "V": 151936},
                                  {"B": 100, "V": 50021}, {"B": 3, "V": 2000}])
def test_the_bins_path_gives_the_key_searchs_bytes_on_the_gpu(spec, seed, dims, monkeypatch):
    """The bins path as committed, with a buffer so small that rows spill (searched whole), with the reads'
    prefetch, the wide sort and decide's tight bounds flipped, and with bins so coarse that the window ends inside
    the logits: the bytes of the key-search paths, which are the reference's."""
    inputs = spec.make_inputs(dims, "bf16", seed=6, device="cuda")
    monkeypatch.setitem(seed.CONFIGS, "BIN_PATH", 0)
    by_search = seed.top_k_top_p_filter(**inputs)
    assert tolerance_failures(by_search, spec.reference(**inputs), spec.tolerance("bf16")) == []
    monkeypatch.setitem(seed.CONFIGS, "BIN_PATH", 1)
    assert torch.equal(seed.top_k_top_p_filter(**inputs), by_search)
    monkeypatch.setitem(seed.CONFIGS, "BIN_CAP", 64)
    assert torch.equal(seed.top_k_top_p_filter(**inputs), by_search)
    monkeypatch.setitem(seed.CONFIGS, "BIN_CAP", 16384)
    monkeypatch.setitem(seed.CONFIGS, "BIN_PREFETCH", 1 - seed.CONFIGS["BIN_PREFETCH"])
    assert torch.equal(seed.top_k_top_p_filter(**inputs), by_search)
    monkeypatch.setitem(seed.CONFIGS, "BIN_SORT_MAX", 4096 if seed.CONFIGS["BIN_SORT_MAX"] == 0 else 0)
    assert torch.equal(seed.top_k_top_p_filter(**inputs), by_search)
    monkeypatch.setitem(seed.CONFIGS, "BIN_TIGHT", 1 - seed.CONFIGS["BIN_TIGHT"])
    assert torch.equal(seed.top_k_top_p_filter(**inputs), by_search)
    monkeypatch.setitem(seed.CONFIGS, "BIN_SCALE", 2)
    monkeypatch.setitem(seed.CONFIGS, "BIN_COUNT", 16)
    assert torch.equal(seed.top_k_top_p_filter(**inputs), by_search)


@pytest.mark.gpu
def test_the_bins_path_on_hand_rows_at_a_real_vocabulary(spec, seed):
    """Ties at both cuts, -inf entries, k above V, one value everywhere, a row of -inf, logits beyond the bins'
    exact range (searched whole): the reference's bytes, and the same bytes in a CUDA graph's replay."""
    x, k, p = (t.cuda() for t in _hand_rows(129280))
    x = torch.cat([x, torch.full_like(x[:1], NEG), x[:1] * 1e6])
    k = torch.cat([k, k[:1], torch.tensor([77], dtype=torch.int32, device="cuda")])
    p = torch.cat([p, p[:1], torch.tensor([0.9], device="cuda")])
    ref = spec.reference(x, k.clamp(max=129280), p)
    out = seed.top_k_top_p_filter(x, k, p)
    assert tolerance_failures(out, ref, spec.tolerance("fp32")) == []
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = seed.top_k_top_p_filter(x, k, p)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, out)
