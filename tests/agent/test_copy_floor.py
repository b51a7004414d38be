"""agent/studies/copy_floor.py on the CPU (--dry-run): which shapes it would time and the bytes each moves.
(The copies themselves are timed on the GPU.)"""
import json

import pytest

from agent.studies import copy_floor
from benchmarks.registry import load_operator


def test_the_plan_is_the_decode_hot_shapes_with_the_work_models_bytes(tmp_path):
    out = tmp_path / "cf.json"
    assert copy_floor.main(["--out", str(out), "--ops", "silu_and_mul", "--max-t", "64", "--dry-run"]) == 0
    data = json.loads(out.read_text())
    spec = load_operator("silu_and_mul")
    hot = {s.id: s for s in spec.select("hot")}
    want = sorted(i for i, s in hot.items() if dict(s.dims)["T"] <= 64)
    assert want and sorted(r["shape"] for r in data["rows"]) == want
    assert len(want) < len(hot)                       # the larger T of the hot set are left out
    for r in data["rows"]:
        assert r["bytes"] == pytest.approx(spec.work(hot[r["shape"]])[1])
        assert 0 < r["t_roof_us"] < 1.0                 # decode sizes: well under a microsecond of traffic
    assert data["floor_us"] is None and data["floor_pdl_us"] is None and "copy_us" not in data["rows"][0]


def test_no_shape_below_the_bound_is_an_error_that_says_so(tmp_path):
    with pytest.raises(SystemExit, match=r"\(T/B/M\) <= 0; raise --max-t"):
        copy_floor.main(["--out", str(tmp_path / "cf.json"), "--ops", "rms_norm", "--max-t", "0", "--dry-run"])


def test_attainment_at_the_copys_time_is_the_scores_with_the_larger_of_roofline_and_floor():
    assert copy_floor.attainment_at(2.0, 0.3, 1.5) == pytest.approx(0.75)       # the floor is T_ref
    assert copy_floor.attainment_at(4.0, 3.0, 1.5) == pytest.approx(0.75)       # the roofline is T_ref
    assert copy_floor.attainment_at(1.0, 0.3, 1.5) == 1.0                       # capped at 1


def test_gemm_and_fused_moe_shapes_are_planned_by_their_token_dimension(tmp_path):
    out = tmp_path / "cf.json"
    assert copy_floor.main(["--out", str(out), "--ops", "gemm,fused_moe", "--max-t", "256", "--read",
                            "--dry-run"]) == 0
    rows = json.loads(out.read_text())["rows"]
    for op, dim in (("gemm", "M"), ("fused_moe", "T")):
        hot = load_operator(op).select("hot")
        want = sorted(s.id for s in hot if dict(s.dims)[dim] <= 256)
        assert want and sorted(r["shape"] for r in rows if r["op"] == op) == want
        assert len(want) < len(hot)                    # prefill sizes are left out


def test_rotated_sets_follow_the_workers_rule():
    assert copy_floor.set_count(1e6) == 4                # small shapes: four sets
    assert copy_floor.set_count(300e6) == 3              # three fit under 1 GiB
    assert copy_floor.set_count(2.8e9) == 1              # one set however large


def test_the_readers_are_torch_sum_and_every_configuration_of_calibrates_reader():
    from benchmarks.calibrate import READ_CONFIGS
    names = list(copy_floor.readers())
    assert names[0] == "torch.sum" and len(names) == 1 + len(READ_CONFIGS)
