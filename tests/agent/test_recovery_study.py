"""The recovery study's CPU parts: the badly tuned start it builds, and the table it reads."""
import json
from pathlib import Path

import pytest

from agent.proposers.search_space import read_configs
from agent.studies.recovery import MOE_TABLE, start_source, worst_valid_config
from benchmarks.registry import load_operator
from sandbox.lint import lint_source


def _seed(op):
    return Path(load_operator(op).seed_path).read_text()


def test_the_worst_valid_config_skips_rows_with_a_failed_shape():
    table = {"table": {"a": {"config": {"X": 1}, "score": 0.1, "t_us": {"s": float("nan")}},
                       "b": {"config": {"X": 2}, "score": 0.3, "t_us": {"s": 5.0}},
                       "c": {"config": {"X": 3}, "score": 0.6, "t_us": {"s": 2.0}}}}
    assert worst_valid_config(table) == ({"X": 2}, 0.3)


def test_fused_moe_starts_from_the_tables_worst_config_in_every_bucket():
    config, _ = worst_valid_config(json.loads(MOE_TABLE.read_text()))
    src, how = start_source("fused_moe", _seed("fused_moe"), None)
    assert "worst valid config" in how
    for _, bucket in read_configs(src).value["buckets"]:
        assert bucket["BLOCK_M"] == config["BLOCK_M"] and bucket["GROUP_M"] == config["GROUP_M"]
        for gemm in ("gemm1", "gemm2"):
            assert {k: bucket[gemm][k] for k in ("BLOCK_N", "BLOCK_K", "num_warps", "num_stages")} == \
                {k: config[k] for k in ("BLOCK_N", "BLOCK_K", "num_warps", "num_stages")}
    assert lint_source(src, "fused_moe", load_operator("fused_moe").arg_names).ok


def test_other_operators_start_detuned_and_a_name_that_matches_nothing_is_refused():
    # scored shapes the measured variant table did not time: the operator's default bad config everywhere
    src, how = start_source("rms_norm", _seed("rms_norm"), None, hot_ids={"T3-H5000"})
    assert how.startswith("every ROWS=1, num_warps=1"), how
    assert all((b["ROWS"], b["num_warps"]) == (1, 1) for b in read_configs(src).value["by_block_h"].values())
    with pytest.raises(SystemExit, match="match no tunable"):
        start_source("rms_norm", _seed("rms_norm"), {"BLOCK_Q": 4})


def _rec(impl, shape, t, weight=1.0, kind="variant"):
    return {"op": "silu_and_mul", "impl": impl, "kind": kind, "shape": shape, "t_us": t, "t_roof_us": 1.0,
            "t_floor_us": 0.5, "weight": weight}


def test_the_worst_variant_is_the_lowest_weighted_and_needs_the_hot_shapes_timed():
    from agent.studies.recovery import worst_variant
    recs = [_rec("seed", "a", 1.0, kind="seed"), _rec("seed", "b", 2.0, kind="seed"),
            _rec("seed:x", "a", 2.0), _rec("seed:x", "b", 2.0),          # (0.5 + 0.5) / 2
            _rec("seed:y", "a", 1.0), _rec("seed:y", "b", 8.0, weight=3.0),   # (1 + 3 * 0.125) / 4
            _rec("seed:z", "a", 9.0)]                                     # one shape missing: not comparable
    name, w, seed = worst_variant(recs, "silu_and_mul", {"a", "b"})
    assert name == "y" and abs(w - 1.375 / 4) < 1e-12 and abs(seed - 0.75) < 1e-12
    assert worst_variant(recs, "silu_and_mul", {"c", "d", "e", "a"}) is None     # the table timed other shapes
    assert worst_variant(recs, "rms_norm", {"a"}) is None


def test_silu_starts_from_the_measured_tables_worst_variant():
    src, how = start_source("silu_and_mul", _seed("silu_and_mul"), None)
    assert "seed variant" in how and "records.json" in how
    assert src != _seed("silu_and_mul")
    assert lint_source(src, "silu_and_mul", load_operator("silu_and_mul").arg_names).ok


def test_the_ratio_compares_medians_of_full_evaluations_only():
    from agent.studies.recovery import like_for_like_ratio
    assert like_for_like_ratio([0.70, 0.74], [0.68, 0.72]) == pytest.approx(0.72 / 0.70)
    assert like_for_like_ratio([], [0.7]) is None and like_for_like_ratio([0.7], []) is None
