"""agent/studies/merge_baseline_runs.py: several measure_baselines runs rendered as one report."""
import json

from agent.studies import merge_baseline_runs as m


def _run(path, gpu, records, command="run"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": {"env": {"gpu": gpu}, "hardware": "h200", "command": command,
                                         "floor_us": 1.3, "rounds": 5, "rounds_max_us": 10.0, "wall_s": 10},
                                "records": records}))
    return path


def _rec(op, shape, impl, t, kind="baseline"):
    return {"op": op, "shape": shape, "dims": {"T": 1}, "dtype": "bf16", "impl": impl, "kind": kind, "t_us": t,
            "t_roof_us": 1.0, "t_floor_us": 1.3, "error": None, "mode": "graph"}


def test_a_later_run_replaces_a_shape_and_the_report_holds_both_runs_and_the_suite_targets(tmp_path):
    a = _run(tmp_path / "a.json", "H200", [_rec("l2_norm", "T8", "seed", 3.0, "seed"),
                                           _rec("l2_norm", "T8", "compile", 2.0),
                                           _rec("l2_norm", "T16", "seed", 2.0, "seed"),
                                           _rec("l2_norm", "T16", "compile", 2.5)], command="first")
    b = _run(tmp_path / "b.json", "H200", [_rec("l2_norm", "T8", "seed", 1.8, "seed"),
                                           _rec("l2_norm", "T8", "compile", 2.0)], command="second")
    records, meta = m.merge([a, b])
    assert sorted((r["shape"], r["impl"], r["t_us"]) for r in records) == [
        ("T16", "compile", 2.5), ("T16", "seed", 2.0), ("T8", "compile", 2.0), ("T8", "seed", 1.8)]
    assert [r["command"] for r in meta["runs"]] == ["first", "second"]
    out = tmp_path / "report.md"
    assert m.main([str(a), str(b), "--out", str(out)]) == 0
    text = out.read_text()
    assert "`first`" in text and "`second`" in text and "## Issue 15's targets" in text
    assert "| l2_norm | 2 | " in text and "## l2_norm" in text
    assert text.index("## Summary") < text.index("## Issue 15's targets") < text.index("## l2_norm")


def test_runs_of_two_cards_or_a_missing_file_exit_2(tmp_path, capsys):
    a = _run(tmp_path / "a.json", "H200", [_rec("l2_norm", "T8", "seed", 3.0, "seed")])
    b = _run(tmp_path / "b.json", "H100", [_rec("l2_norm", "T16", "seed", 3.0, "seed")])
    assert m.main([str(a), str(b), "--out", str(tmp_path / "r.md")]) == 2
    assert "several GPUs" in capsys.readouterr().err
    assert m.main([str(a), str(tmp_path / "none.json"), "--out", str(tmp_path / "r.md")]) == 2
    assert "none.json" in capsys.readouterr().err and not (tmp_path / "r.md").exists()


def test_a_run_without_records_exits_2(tmp_path, capsys):
    empty = _run(tmp_path / "empty.json", "H200", [])
    assert m.main([str(empty), "--out", str(tmp_path / "r.md")]) == 2
    assert "empty.json" in capsys.readouterr().err
