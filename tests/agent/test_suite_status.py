"""agent/studies/suite_status.py on small records of both studies written as files: which baselines count, the
two targets' verdicts, the later file winning a shape, the markdown, and exit 2 on a path without records."""
import json

import pytest

from agent.studies import suite_status as s


def _contender(t, ok=True, **extra):
    return {"t_us": t, "ok": ok, "mode": "graph", **extra}


def _row(op, shape, seed, t_roof=6.0, **others):
    """A measure_new_ops row: the seed at `seed` us, and eager/compile/liger given as contender dicts."""
    return {"op": op, "shape": shape, "dims": {"T": 1}, "phase": "decode", "weight": 1.0, "t_roof_us": t_roof,
            "contenders": {"seed": _contender(seed), **others}, "variants": {}, "attainment": None}


def _new_ops(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"command": "test", "ops": sorted({r["op"] for r in rows}), "rows": rows,
                                "floor_us": 1.5, "hardware": "h100", "gpu": "GPU-N", "torch": "2", "triton": "3",
                                "liger": "0.8", "dry_run": False}))
    return path


def _record(shape, impl, t, kind="baseline", error=None):
    return {"op": "gemm", "shape": shape, "dims": {"M": 64}, "dtype": "bf16", "impl": impl, "kind": kind, "t_us": t,
            "t_roof_us": 8.0, "t_floor_us": 1.5, "error": error}


def _records(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": {"env": {"gpu": "GPU-R"}, "hardware": "h200", "floor_us": 1.5},
                                "records": records}))
    return path


def _op(st, name):
    return next(o for o in st["operators"] if o["op"] == name)


def test_a_wrong_eager_and_another_contracts_liger_are_never_the_best(tmp_path):
    f = _new_ops(tmp_path / "new_ops.json", [_row("softmax", "a", 10.0, eager=_contender(5.0, ok=False),
                                                  compile=_contender(12.0),
                                                  liger=_contender(4.0, other_contract=True))])
    o = _op(s.status([f]), "softmax")
    assert o["losses"] == [] and o["a_met"] is True
    assert o["worst"]["baseline"] == "compile" and o["worst"]["ratio"] == pytest.approx(10 / 12)


def test_a_correct_faster_baseline_misses_target_a(tmp_path):
    f = _new_ops(tmp_path / "new_ops.json", [_row("softmax", "a", 10.0, compile=_contender(8.0)),
                                             _row("softmax", "b", 10.0, compile=_contender(10.0))])
    o = _op(s.status([f]), "softmax")
    assert o["a_met"] is False and o["compared"] == 2      # a tie (shape b) is no loss
    assert [(x["shape"], x["baseline"]) for x in o["losses"]] == [("a", "compile")]


def test_a_seed_that_failed_a_shape_misses_target_a(tmp_path):
    row = _row("softmax", "b", 10.0, compile=_contender(20.0))
    row["contenders"]["seed"]["ok"] = False                       # a WRONG seed's time is no time
    f = _new_ops(tmp_path / "new_ops.json", [_row("softmax", "a", 10.0, compile=_contender(20.0)), row])
    o = _op(s.status([f]), "softmax")
    assert o["seed_untimed"] == ["b"] and o["a_met"] is False and o["compared"] == 1
    assert o["median_attainment"] == pytest.approx(0.6)           # from shape a alone


def test_median_attainment_and_target_b(tmp_path):
    # attainments max(T_roof, floor 1.5) / T_seed: 6/10 = 0.6, 6/20 = 0.3, 6/6 = 1.0 -> median 0.6 (at the bar)
    rows = [_row("l2_norm", sid, t) for sid, t in (("a", 10.0), ("b", 20.0), ("c", 6.0))]
    rows += [_row("softmax", "x", 20.0), _row("softmax", "y", 1.0, t_roof=0.1)]   # 0.3 and 1.0 (floor/1.0, capped)
    st = s.status([_new_ops(tmp_path / "new_ops.json", rows)])
    assert _op(st, "l2_norm")["median_attainment"] == pytest.approx(0.6) and _op(st, "l2_norm")["b_met"] is True
    assert _op(st, "softmax")["median_attainment"] == pytest.approx(0.65) and _op(st, "softmax")["b_met"] is True
    assert _op(st, "l2_norm")["a_met"] is None       # no baseline anywhere: nothing to beat
    assert st["suite"]["median_of_medians"] == pytest.approx(0.625)
    st = s.status([_new_ops(tmp_path / "low.json", [_row("l2_norm", "a", 20.0)])])
    assert _op(st, "l2_norm")["b_met"] is False


def test_records_json_skips_failed_baselines_and_counts_both_targets(tmp_path):
    f = _records(tmp_path / "records.json", [
        _record("M64", "seed", 10.0, kind="seed"), _record("M64", "cublas", 9.0, error="WRONG"),
        _record("M64", "compile", 11.0), _record("M64", "seed:v", 2.0, kind="variant"),
        _record("M128", "seed", 16.0, kind="seed"), _record("M128", "eager", 15.9)])
    st = s.status([f])
    o = _op(st, "gemm")
    assert [(x["shape"], x["baseline"]) for x in o["losses"]] == [("M128", "eager")]   # not cublas, not the variant
    assert o["losses"][0]["within_noise"] is True and o["a_met"] is False
    assert o["median_attainment"] == pytest.approx((0.8 + 0.5) / 2) and o["b_met"] is True
    assert st["suite"] == {"operators": 1, "a_met": 0, "b_met": 1, "both_met": 0, "median_of_medians": 0.65}
    assert st["gpus"] == ["GPU-R"] and st["hardware"] == ["h200"]


def test_paired_rounds_decide_a_loss_or_leave_it_undecided(tmp_path):
    """measure_baselines --rounds: a loss is decided when every paired round's best / seed interval lies below 1,
    undecided when it holds 1; one timing decides only outside the 2% noise band."""
    def timed(shape, impl, rounds, kind="baseline"):
        r = _record(shape, impl, sorted(rounds)[len(rounds) // 2], kind=kind)
        r["rounds_us"] = rounds
        return r
    seed = [2.0, 2.02, 1.98, 2.01, 1.99]
    f = _records(tmp_path / "records.json", [
        timed("M1", "seed", seed, kind="seed"), timed("M1", "compile", [1.8, 1.82, 1.79, 1.81, 1.8]),
        timed("M2", "seed", seed, kind="seed"), timed("M2", "compile", [1.97, 2.1, 1.9, 2.05, 1.99])])
    o = _op(s.status([f]), "gemm")
    by = {x["shape"]: x for x in o["losses"]}
    assert by["M1"]["decided"] is True and by["M1"]["paired"]["rounds"] == 5
    assert by["M2"]["decided"] is False and by["M2"]["paired"]["lo"] < 1.0 < by["M2"]["paired"]["hi"]
    assert o["a_verdict"] == "missed"
    g = _records(tmp_path / "r2.json", [timed("M2", "seed", seed, kind="seed"),
                                        timed("M2", "compile", [1.97, 2.1, 1.9, 2.05, 1.99])])
    assert _op(s.status([g]), "gemm")["a_verdict"] == "undecided"
    assert "undecided" in s.render(s.status([g]))
    h = _new_ops(tmp_path / "new_ops.json", [_row("softmax", "a", 10.0, compile=_contender(9.0))])
    assert _op(s.status([h]), "softmax")["a_verdict"] == "missed"          # 10% in one timing: decided


def test_the_later_path_wins_a_shape_measured_twice(tmp_path):
    old = _new_ops(tmp_path / "old" / "new_ops.json", [_row("softmax", "a", 10.0, compile=_contender(8.0)),
                                                       _row("softmax", "b", 10.0)])
    new = _new_ops(tmp_path / "new" / "new_ops.json", [_row("softmax", "a", 7.0, compile=_contender(8.0))])
    o = _op(s.status(s.input_files([old, new])), "softmax")
    assert o["shapes"] == 2 and o["a_met"] is True          # shape b kept from the old file
    o = _op(s.status(s.input_files([new, old])), "softmax")
    assert o["a_met"] is False


def test_main_writes_the_operator_row_and_json(tmp_path, capsys):
    _new_ops(tmp_path / "runs" / "x" / "new_ops.json", [_row("softmax", "a", 10.0, compile=_contender(9.9))])
    _records(tmp_path / "runs" / "records.json", [_record("M64", "seed", 10.0, kind="seed")])
    md, js = tmp_path / "status.md", tmp_path / "status.json"
    assert s.main([str(tmp_path / "runs"), "--out", str(md), "--json", str(js)]) == 0
    text = md.read_text()
    assert "| softmax | 1 | 0.600 | **met** | 1 of 1 | 1.010x at a (compile) | undecided |" in text
    assert "softmax a: seed 10.00 us, compile 9.90 us, 1.010x (within 2%: one timing cannot decide)" in text
    assert "GPU-N" in text and "GPU-R" in text and capsys.readouterr().out == ""
    assert {o["op"] for o in json.loads(js.read_text())["operators"]} == {"softmax", "gemm"}


def test_a_path_without_records_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert s.main([str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert s.main([str(tmp_path / "empty")]) == 2
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"something": 1}))
    assert s.main([str(other)]) == 2
    assert str(other) in capsys.readouterr().err
