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
