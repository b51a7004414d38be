"""agent/studies/missed_counters.py on the CPU: the shape list it would profile, and the generated file through
which ncu profiles a baseline (loaded as sandbox.ncu_target loads a candidate, and called here). ncu itself runs
on the GPU machine."""
import json

import pytest

from agent.studies import missed_counters as mc
from benchmarks.registry import load_operator


def test_the_default_list_names_hot_shapes_and_the_dry_run_profiles_nothing(tmp_path):
    out = tmp_path / "mc.json"
    assert mc.main(["--out", str(out), "--dry-run"]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == len(mc.DEFAULT_SHAPES)
    for r in rows:
        hot = {s.id: s for s in load_operator(r["op"]).select("hot")}
        assert r["dims"] == dict(hot[r["shape"]].dims) and "counters" not in r


def test_a_shape_outside_the_hot_set_stops_the_study_naming_the_choices(tmp_path):
    with pytest.raises(SystemExit, match="no hot shape 'T3-H7'.*T1-H512"):
        mc.main(["--out", str(tmp_path / "mc.json"), "--shapes", "rms_norm:T3-H7", "--dry-run"])
    with pytest.raises(SystemExit, match="not op:shape_id"):
        mc.parse_shapes("rms_norm")


def test_the_baseline_file_runs_the_baseline_as_aka_bench_does(tmp_path):
    torch = pytest.importorskip("torch")
    from sandbox.ncu_target import load_candidate
    path = tmp_path / "rms_norm_eager.py"
    path.write_text(mc.WRAPPER.format(op="rms_norm", baseline="eager"))
    fn = load_candidate(str(path), "rms_norm")
    spec = load_operator("rms_norm")
    inputs = spec.make_inputs({"T": 4, "H": 64}, "fp32", 0, "cpu")
    torch.testing.assert_close(fn(**inputs), spec.reference(**inputs))
