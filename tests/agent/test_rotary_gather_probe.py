"""agent/studies/rotary_gather_probe.py on the CPU: its pre-gathered kernel is the operator's math (it passes the
same check as the seed and Liger), the check rejects rows gathered for other positions, and the dry run writes
every implementation's verdict."""
import json

from agent.studies import rotary_gather_probe as probe
from agent.studies.measure_baselines import check, expected_for, input_sets
from agent.studies.seed_variants import load_seed
from benchmarks.registry import load_operator


def _one_shape():
    spec = load_operator("rotary_embedding")
    shape = next(s for s in spec.select("hot") if s.dim["T"] == 1)
    dims = spec.interpreter_dims(shape.dim)
    sets = input_sets(spec, dims, "fp32", "cpu", n_max=1)
    pristine, exp = expected_for(spec, sets, dims, "fp32")
    return spec, pristine, exp


def test_the_pregathered_kernel_passes_and_wrong_rows_fail():
    spec, pristine, exp = _one_shape()
    fn, prepare = probe.implementations(spec, load_seed(spec))["pregathered"]
    assert check(spec, fn, prepare, pristine, "fp32", exp)[2] is None

    def other_rows(s):       # the rows of positions + 1: what a kernel reading the wrong cache row returns
        return {"q": s["q"], "k": s["k"], "rows": s["cos_sin_cache"].index_select(
            0, (s["positions"] + 1) % s["cos_sin_cache"].shape[0])}
    assert check(spec, fn, other_rows, pristine, "fp32", exp)[2] is not None


def test_dry_run_checks_all_three(tmp_path):
    out = tmp_path / "probe.json"
    assert probe.main(["--out", str(out), "--dry-run", "--max-t", "1"]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["shape"] for r in rows] == ["T1-Hq8-Hk1-D128"]
    assert rows[0]["failed"] == {} and sorted(rows[0]["rel_l2"]) == ["liger", "pregathered", "seed"]
    assert rows[0]["median_us"] == {}                      # nothing timed without a GPU


def test_rounds_below_one_are_refused(tmp_path, capsys):
    assert probe.main(["--out", str(tmp_path / "x.json"), "--dry-run", "--rounds", "0"]) == 2
    assert "--rounds 0 must be at least 1" in capsys.readouterr().err
