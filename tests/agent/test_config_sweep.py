"""agent/studies/config_sweep.py on the CPU: its gemm spaces are whole configurations of today's gemm seed
(every key the seed reads, a tile that fits in shared memory, kept as given), and one of each kind (pointer
loads, TMA, stream-K) computes a @ b.T under the interpreter. The sweep's timing runs on the GPU."""
import pytest
import torch

from agent.studies import config_sweep

SPACES = ("gemm", "gemm_decode")


@pytest.mark.parametrize("space", SPACES)
def test_every_config_is_a_whole_gemm_table_whose_tile_fits(space):
    seed = config_sweep._seed_module("gemm")
    keys = set(seed.CONFIGS["buckets"][-1][1])
    configs = list(config_sweep.SPACES[space]())
    assert configs
    for cfg in configs:
        (bound, bucket), = cfg["buckets"]
        assert bound >= 1 << 62 and keys <= set(bucket), keys - set(bucket)
        assert set(seed.CONFIGS) <= set(cfg)          # stream-K's settings travel with the bucket
        smem = (bucket["BLOCK_M"] + bucket["BLOCK_N"]) * bucket["BLOCK_K"] * 2 * bucket["num_stages"]
        assert smem <= config_sweep.SMEM_BYTES


def test_the_decode_space_keeps_its_tile_and_spans_k_steps_loads_and_stream_k():
    seed = config_sweep._seed_module("gemm")
    configs = list(config_sweep.gemm_decode_space())
    buckets = [c["buckets"][0][1] for c in configs]
    assert {b["BLOCK_K"] for b in buckets} == {128, 256, 512}
    assert {b["TMA"] for b in buckets} == {0, 1} and {b["STREAM_K"] for b in buckets} == {0, 1}
    for cfg in configs:                              # min_programs 0: the tile is not narrowed for small grids
        seed.CONFIGS = cfg
        picked = seed._pick_config(64, 7168)
        assert (picked["BLOCK_M"], picked["BLOCK_N"]) == (cfg["buckets"][0][1]["BLOCK_M"],
                                                          cfg["buckets"][0][1]["BLOCK_N"])


def test_one_config_of_each_kind_computes_the_product_under_the_interpreter():
    seed = config_sweep._seed_module("gemm")
    g = torch.Generator().manual_seed(3)
    a = torch.randn(8, 512, generator=g)
    b = torch.randn(48, 512, generator=g)
    picked = {}
    for cfg in config_sweep.gemm_decode_space():
        bucket = cfg["buckets"][0][1]
        kind = ("stream_k" if bucket["STREAM_K"] else "tma" if bucket["TMA"] else "pointers")
        if bucket["BLOCK_K"] == 128 and bucket["BLOCK_N"] in (32, 128) and kind not in picked:
            picked[kind] = cfg
    assert set(picked) == {"pointers", "tma", "stream_k"}
    for kind, cfg in picked.items():
        seed.CONFIGS = {**cfg, "stream_k_min_k": 256}          # K = 512 takes stream-K where the bucket asks
        out = seed.gemm(a, b)
        torch.testing.assert_close(out, a @ b.T, rtol=1e-4, atol=1e-3, msg=kind)


def test_the_confirmation_says_the_baselines_time_over_each_config_round_by_round():
    entries = [{"label": "seed", "cfg": {}, "rounds_us": [40.0, 41.0, 39.0, 40.0, 40.5]},
               {"label": "#1", "cfg": {}, "rounds_us": [36.0, 36.5, 35.5, 36.0, 36.2]},
               {"label": "baseline", "cfg": None, "rounds_us": [38.0, 38.4, 37.6, 38.0, 38.1]}]
    assert config_sweep.paired_vs_baseline(entries[1], entries) == "1.056x [1.052, 1.059]"
    assert config_sweep.paired_vs_baseline(entries[0], entries).startswith("0.95")
    assert config_sweep.paired_vs_baseline(entries[2], entries) == ""
    assert config_sweep.paired_vs_baseline(entries[1], entries[:2]) == ""             # no baseline in the run


@pytest.mark.parametrize("which", ("gemm1", "gemm2"))
def test_the_moe_spaces_vary_one_gemm_of_the_decode_buckets_and_leave_the_rest_as_the_seed_has_it(which):
    seed = config_sweep._seed_module("fused_moe").CONFIGS
    other = "gemm2" if which == "gemm1" else "gemm1"
    configs = list(config_sweep.SPACES[f"fused_moe_{which}"]())
    tiles = []
    for c in configs:                                      # one tile a config, the same in every decode bucket
        own = {tuple(sorted(b[which].items())) for bound, b in c["buckets"]
               if bound <= config_sweep.MOE_DECODE_MAX_ROWS}
        assert len(own) == 1, c["_sweep"]
        tiles += own
    assert len(set(tiles)) == len(configs) > 10           # and a different tile in each config
    for cfg in configs:
        assert cfg["_sweep"].startswith(f"decode {which} ") and config_sweep._label(cfg) == cfg["_sweep"]
        for (bound, b), (_, s) in zip(cfg["buckets"], seed["buckets"]):
            assert b[other] == s[other] and b["BLOCK_M"] == s["BLOCK_M"] and b["GROUP_M"] == s["GROUP_M"]
            if bound > config_sweep.MOE_DECODE_MAX_ROWS:
                assert b[which] == s[which]                # prefill buckets untouched
            else:
                per_stage = b["BLOCK_M"] * b[which]["BLOCK_K"] + (2 if which == "gemm1" else 1) * (
                    b[which]["BLOCK_K"] * b[which]["BLOCK_N"])
                assert per_stage * 2 * b[which]["num_stages"] <= config_sweep.SMEM_BYTES


@pytest.mark.interpreter
def test_a_moe_space_config_computes_fused_moe_under_the_interpreter():
    from benchmarks.registry import load_operator
    spec = load_operator("fused_moe")
    mod = config_sweep._seed_module("fused_moe")
    dims = {"T": 4, "H": 128, "I": 64, "E": 8, "k": 2}
    inputs = spec.make_inputs(dims, "fp32", seed=5)
    ref = spec.reference(**inputs)
    cfg = next(c for c in config_sweep.SPACES["fused_moe_gemm2"]() if "'BLOCK_N': 64, 'BLOCK_K': 64" in c["_sweep"])
    mod.CONFIGS = cfg
    torch.testing.assert_close(mod.fused_moe(**inputs), ref, rtol=1e-4, atol=1e-4)
