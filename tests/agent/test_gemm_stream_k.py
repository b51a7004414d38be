"""agent/studies/gemm_stream_k.py on the CPU: how a variant lands in the seed's CONFIGS, and its argument errors."""
import copy
import importlib.util

import pytest

from agent.studies import gemm_stream_k as study
from benchmarks.registry import load_operator


@pytest.fixture()
def seed():
    spec = importlib.util.spec_from_file_location("gemm_seed_study_test", load_operator("gemm").seed_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bucket(mod, M):
    return next(entry for bound, entry in mod.CONFIGS["buckets"] if M <= bound)


def test_a_variant_edits_only_the_bucket_of_its_m(seed):
    committed = copy.deepcopy(seed.CONFIGS)
    study._apply(seed, committed, study.VARIANTS["no_stream_k"], 256, seed._sm_count)
    assert _bucket(seed, 256)["STREAM_K"] == 0
    assert _bucket(seed, 64)["STREAM_K"] == committed["buckets"][2][1]["STREAM_K"] == 1
    assert committed["buckets"][4][1]["STREAM_K"] == 1, "the committed table must not be edited in place"


def test_forced_variants_run_stream_k_on_their_own_tile_at_any_tile_count(seed):
    committed = copy.deepcopy(seed.CONFIGS)
    study._apply(seed, committed, study.VARIANTS["sk_128x128_s5"], 256, seed._sm_count)
    assert seed.CONFIGS["stream_k_max_tile_share"] >= 1e9
    cfg = seed._stream_k_config(256, 7168, 8192, 132)       # 112 tiles of 128 x 128: off as committed
    assert cfg is not None and (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_stages"]) == (128, 128, 5)
    study._apply(seed, committed, study.VARIANTS["committed"], 256, seed._sm_count)
    assert seed._stream_k_config(256, 7168, 8192, 132) is None


def test_sms_stands_in_for_the_sm_count_and_is_restored(seed):
    committed = copy.deepcopy(seed.CONFIGS)
    original = seed._sm_count
    study._apply(seed, committed, study.VARIANTS["sk_112"], 256, original)
    assert seed._sm_count(None) == 112
    assert "sms" not in _bucket(seed, 256)
    study._apply(seed, committed, study.VARIANTS["committed"], 256, original)
    assert seed._sm_count is original


def test_an_unknown_shape_stops_before_any_gpu_work(tmp_path):
    with pytest.raises(SystemExit, match="unknown gemm shapes"):
        study.main(["--out", str(tmp_path / "x.json"), "--shapes", "M3-N3-K3"])
    assert not (tmp_path / "x.json").exists()


def test_an_unknown_variant_stops_before_any_gpu_work(tmp_path):
    with pytest.raises(SystemExit, match="unknown variants .'sk_typo'."):
        study.main(["--out", str(tmp_path / "x.json"), "--shapes", "M64-N1280-K8192", "--variants", "committed,sk_typo"])
