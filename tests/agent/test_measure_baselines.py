"""agent/studies/measure_baselines.py and its report: the parts that run without a GPU."""
import json

import pytest

from agent.studies import baseline_report as br
from agent.studies.measure_baselines import main
from agent.studies.seed_variants import set_path


def test_set_path_reaches_every_bucket_and_one_key():
    cfg = {"buckets": [(16, {"A": 1}), (64, {"A": 2})], "by_block": {256: {"R": 1}, 512: {"R": 2}}, "x": 0}
    set_path(cfg, "buckets.*.A", 9)
    set_path(cfg, "by_block.512.R", 7)
    set_path(cfg, "x", 3)
    assert cfg == {"buckets": [(16, {"A": 9}), (64, {"A": 9})], "by_block": {256: {"R": 1}, 512: {"R": 7}}, "x": 3}
    with pytest.raises(ValueError, match="ends in"):
        set_path(cfg, "buckets.*", 1)


def _rec(shape, impl, kind, t, dims, roof=1.0, floor=1.0):
    return {"op": "silu_and_mul", "shape": shape, "impl": impl, "kind": kind, "t_us": t, "dims": dims,
            "t_roof_us": roof, "t_floor_us": floor, "mode": "graph", "error": None, "rel_l2": 1e-3}


def test_ratios_and_targets_from_records():
    recs = [_rec("T16", "seed", "seed", 2.0, {"T": 16, "I": 256}), _rec("T16", "seed:flat", "variant", 1.4, {"T": 16, "I": 256}),
            _rec("T16", "compile", "baseline", 1.8, {"T": 16, "I": 256}),
            _rec("T16", "liger", "baseline", 1.6, {"T": 16, "I": 256}),
            _rec("T8192", "seed", "seed", 40.0, {"T": 8192, "I": 3584}, roof=38.0),
            _rec("T8192", "seed:flat", "variant", 41.0, {"T": 8192, "I": 3584}, roof=38.0),
            _rec("T8192", "compile", "baseline", 44.0, {"T": 8192, "I": 3584}, roof=38.0),
            _rec("T8192", "liger", "baseline", None, {"T": 8192, "I": 3584}, roof=38.0)]
    recs[-1]["error"] = "raised"
    shapes = br.by_shape(recs, "silu_and_mul")
    assert br.ratios(shapes, br._seed_t) == {"T16": pytest.approx(0.8), "T8192": pytest.approx(1.1)}
    seed_targets = dict((w, m) for w, m, _ in br.targets("silu_and_mul", shapes))
    assert seed_targets == {">= 1.0x the best baseline on every hot shape": False,
                            "decode shapes (T <= 256) within 1.5x of the latency floor": False}
    best_targets = dict((w, m) for w, m, _ in br.targets("silu_and_mul", shapes, br._best_t))
    assert all(best_targets.values())          # 1.6/1.4 and 44/40; 1.4x the floor
    text = br.render(recs, {"command": "x", "env": {}}, type("HW", (), {"name": "h200", "bandwidth_tbs": 4.8,
                                                                        "peaks_tflops": {"bf16": 989.4}})())
    assert "| T16 | T=16 I=256 | 1.00 | 1.00 | 2.00 | 1.80 | 1.60 | liger | 0.80x | 0.50 |" in text
    assert "1.40 *" in text and "liger at T8192: raised" in text


@pytest.mark.interpreter
def test_dry_run_checks_the_seed_and_baselines_on_the_cpu(tmp_path):
    out = tmp_path / "report.md"
    assert main(["--out", str(out), "--dry-run", "--ops", "silu_and_mul", "--only", "eager"]) == 0
    data = json.loads((tmp_path / "report_records" / "records.json").read_text())
    impls = {(r["shape"], r["impl"]): r for r in data["records"]}
    assert {i for _, i in impls} == {"seed", "eager"}
    assert all(r["error"] is None and r["rel_l2"] < 1e-5 and r["t_us"] is None for r in impls.values())
    assert "Dry run on the CPU" in out.read_text()


@pytest.mark.interpreter
def test_resume_keeps_finished_operators_and_measures_the_rest(tmp_path):
    out = tmp_path / "report.md"
    assert main(["--out", str(out), "--dry-run", "--ops", "silu_and_mul", "--only", "eager", "--no-variants"]) == 0
    assert main(["--out", str(out), "--dry-run", "--ops", "silu_and_mul,rms_norm", "--only", "eager",
                 "--no-variants", "--resume"]) == 0
    data = json.loads((tmp_path / "report_records" / "records.json").read_text())
    assert {r["op"] for r in data["records"]} == {"silu_and_mul", "rms_norm"}
    assert len([r for r in data["records"] if r["op"] == "silu_and_mul"]) == 16       # 8 shapes x (seed, eager)
    assert "--resume" in data["meta"]["command"] and "Not measured" not in out.read_text()


@pytest.mark.gpu
def test_one_operator_is_timed_beside_its_static_compile_on_the_gpu(tmp_path):
    out = tmp_path / "report.md"
    assert main(["--out", str(out), "--ops", "silu_and_mul", "--only", "compile", "--no-variants"]) == 0
    data = json.loads((tmp_path / "report_records" / "records.json").read_text())
    assert data["records"] and all(r["t_us"] and r["mode"] == "graph" for r in data["records"]), data["records"]
    assert "best / seed" in out.read_text()


def test_rounds_are_round_robin_and_the_time_is_the_median_of_rounds(monkeypatch):
    """--rounds on a small shape: rounds 2..R time every timed implementation in turn (seed, variant, baseline,
    then again), each record's time becomes the median of its rounds; an implementation that was not timed stays
    out, one whose later round comes back in another mode keeps only its matching rounds, and a shape whose seed
    took more than rounds_max_us gets no more rounds. The GPU timer is the one part replaced: it needs a GPU."""
    import io
    from agent.studies import measure_baselines as mb
    order, script = [], {"seed": [2.1, 1.9], "seed:v": [2.5, 2.6], "compile": [1.7, 2.3]}

    def fake_time(rec, fn, prepare, sets, eager=True):
        order.append(rec.impl)
        rec.t_us, rec.mode = script[rec.impl].pop(0), ("eager" if rec.impl == "seed:v" and not script[rec.impl]
                                                        else "graph")
    monkeypatch.setattr(mb, "_time", fake_time)
    recs = [mb.Record("op", "T16", {}, "bf16", "seed", "seed", t_us=2.0, mode="graph"),
            mb.Record("op", "T16", {}, "bf16", "seed:v", "variant", t_us=2.4, mode="graph"),
            mb.Record("op", "T16", {}, "bf16", "liger", "baseline", error="raised"),
            mb.Record("op", "T16", {}, "bf16", "compile", "baseline", t_us=2.0, mode="graph")]
    impls = [(r.impl, r.kind, object(), None) for r in recs]
    mb.more_rounds(recs, impls, [{}], 3, 10.0, io.StringIO())
    assert order == ["seed", "seed:v", "compile", "seed", "seed:v", "compile"]
    assert recs[0].rounds_us == [2.0, 2.1, 1.9] and recs[0].t_us == 2.0
    assert recs[1].rounds_us == [2.4, 2.5] and recs[1].t_us == pytest.approx(2.45)     # its eager round dropped
    assert recs[2].rounds_us is None and recs[2].t_us is None
    assert recs[3].rounds_us == [2.0, 1.7, 2.3] and recs[3].t_us == 2.0
    big = [mb.Record("op", "T8192", {}, "bf16", "seed", "seed", t_us=40.0, mode="graph")]
    order.clear()
    mb.more_rounds(big, impls[:1], [{}], 3, 10.0, io.StringIO())
    assert order == [] and big[0].rounds_us is None and big[0].t_us == 40.0


def test_rounds_below_one_is_a_usage_error(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "r.md"), "--dry-run", "--rounds", "0"]) == 2
    assert "--rounds 0 must be at least 1" in capsys.readouterr().err


def test_the_report_says_how_many_rounds():
    hw = type("HW", (), {"name": "h200", "bandwidth_tbs": 4.8, "peaks_tflops": {"bf16": 989.4}})()
    recs = [_rec("T16", "seed", "seed", 2.0, {"T": 16, "I": 256})]
    assert "timed 5 times, round-robin" in br.render(recs, {"command": "x", "env": {}, "rounds": 5,
                                                            "rounds_max_us": 10.0}, hw)
    assert "round-robin" not in br.render(recs, {"command": "x", "env": {}}, hw)


@pytest.mark.gpu
def test_rounds_on_the_gpu_time_small_shapes_several_times(tmp_path):
    out = tmp_path / "report.md"
    assert main(["--out", str(out), "--ops", "silu_and_mul", "--only", "compile", "--no-variants",
                 "--rounds", "3", "--rounds-max-us", "10"]) == 0
    data = json.loads((tmp_path / "report_records" / "records.json").read_text())
    for r in data["records"]:
        seed = next(s for s in data["records"] if s["shape"] == r["shape"] and s["kind"] == "seed")
        assert (r["rounds_us"] is not None and len(r["rounds_us"]) == 3) == (seed["rounds_us"] is not None)
    assert any(r["rounds_us"] for r in data["records"]) and not all(r["rounds_us"] for r in data["records"])


def test_the_median_interval_is_the_sign_tests():
    assert br.median_interval([5, 1, 4, 2, 3]) == (1, 5, pytest.approx(1 - 2 / 32))          # n = 5: min and max
    assert br.median_interval([1, 2, 3, 4]) is None                                          # 87.5% < 90%
    lo, hi, cov = br.median_interval(list(range(9)))          # i = 2: 1 - 2 * (1 + 9) / 512; i = 3 would be 82%
    assert (lo, hi) == (1, 7) and cov == pytest.approx(1 - 20 / 512)


def _rounds(shape, impl, kind, rounds, dims=None):
    rec = _rec(shape, impl, kind, sorted(rounds)[len(rounds) // 2] if rounds else 40.0, dims or {"T": 64, "I": 256})
    rec["rounds_us"] = rounds or None
    return rec


def test_paired_rounds_decide_a_ratio_target_per_shape_or_say_they_cannot():
    ahead = [2.0, 2.1, 1.9, 2.05, 2.0]
    recs = [_rounds("A", "seed", "seed", ahead), _rounds("A", "compile", "baseline", [t * 1.06 for t in ahead]),
            _rounds("A", "liger", "baseline", [t * 1.3 for t in ahead]),
            _rounds("B", "seed", "seed", ahead), _rounds("B", "compile", "baseline", [t * r for t, r in
                                                                                   zip(ahead, (0.97, 1.03, 1.01, 0.99, 1.02))]),
            _rounds("C", "seed", "seed", ahead), _rounds("C", "compile", "baseline", [t * 0.95 for t in ahead]),
            _rounds("D", "seed", "seed", []), _rounds("D", "compile", "baseline", []),
            _rounds("E", "seed", "seed", ahead), _rounds("E", "compile", "baseline", ahead[:4])]
    per = br.paired_verdicts("silu_and_mul", br.by_shape(recs, "silu_and_mul"))
    assert {s: b for s, (b, _, _) in per.items()} == dict.fromkeys("ABCDE", 1.0)
    assert {s: v for s, (_, v, _) in per.items()} == {"A": "met", "B": "undecided", "C": "missed", "D": "one timing",
                                                      "E": "undecided"}
    assert "compile: median 1.060x, [1.060, 1.060] at 94%, 5 rounds" == per["A"][2]     # the best baseline, paired
    assert "not paired" in per["E"][2]
    lines = br.paired_lines("silu_and_mul", br.by_shape(recs, "silu_and_mul"))
    assert "**missed**" in lines[0] and "met on 1; missed on 1; undecided on 2; one timing on 1" in lines[0]
    assert br.paired_verdicts("fused_moe", br.by_shape(recs, "silu_and_mul")) is None   # no per-shape ratio bar


def test_gemms_bars_depend_on_m_and_shapes_between_have_none():
    assert [br.ratio_bar("gemm", {"M": m}) for m in (1, 64, 128, 256, 8192)] == [1.05, 1.05, None, 1.0, 1.0]
    rounds = [40.0, 41.0, 39.0, 40.0, 40.5]
    recs = []
    for m, factor in ((64, 0.95), (128, 1.0), (256, 1.02)):
        for impl, kind, f in (("seed", "seed", 1.0), ("cublas", "baseline", factor)):
            rec = _rounds(f"M{m}", impl, kind, [t * f for t in rounds], {"M": m, "N": 7168, "K": 8192})
            recs.append({**rec, "op": "gemm"})
    per = br.paired_verdicts("gemm", br.by_shape(recs, "gemm"))
    assert {s: (b, v) for s, (b, v, _) in per.items()} == {"M64": (1.05, "missed"), "M256": (1.0, "met")}
    lines = br.paired_lines("gemm", br.by_shape(recs, "gemm"))
    assert "the 1x/1.05x target" in lines[0] and "M64: missed at 1.05x" in lines[1]


@pytest.mark.interpreter
def test_operators_with_tuple_outputs_or_in_place_writes_are_checked_by_their_contract(tmp_path):
    """fused_add_rms_norm returns (out, residual_out), reshape_and_cache writes its caches and returns None,
    moe_align_block_size is judged by its invariants: each is checked the sandbox's way (every part, mutated
    arguments included), so `--ops all` covers issue 15's operators too."""
    out = tmp_path / "report.md"
    assert main(["--out", str(out), "--dry-run", "--ops", "fused_add_rms_norm,reshape_and_cache,moe_align_block_size",
                 "--only", "eager", "--no-variants"]) == 0
    data = json.loads((tmp_path / "report_records" / "records.json").read_text())
    assert {r["op"] for r in data["records"]} == {"fused_add_rms_norm", "reshape_and_cache", "moe_align_block_size"}
    assert all(r["error"] is None for r in data["records"]), [r["error"] for r in data["records"] if r["error"]]


@pytest.mark.interpreter
def test_a_wrong_part_of_a_tuple_or_a_missed_in_place_write_fails_the_check():
    import torch
    from agent.studies.measure_baselines import check
    from benchmarks.registry import load_operator
    from sandbox import results
    for op, broken in (("fused_add_rms_norm", lambda f: lambda **a: (f(**a)[0], a["x"].clone())),
                       ("reshape_and_cache", lambda f: lambda **a: None)):
        spec = load_operator(op)
        shape = spec.select("hot")[0]
        dims = spec.interpreter_dims(shape.dim)
        inputs = spec.make_inputs(dims, "fp32", 1000, "cpu")
        exp = results.expected(spec, inputs, dims, "fp32", 0, keep_inputs=True)
        assert check(spec, spec.reference, None, inputs, "fp32", exp)[2] is None
        why = check(spec, broken(spec.reference), None, inputs, "fp32", exp)[2]
        assert why, op
    # the inputs the checks were given stay as they were (mutated arguments go to clones)
    assert torch.equal(inputs["key_cache"], spec.make_inputs(dims, "fp32", 1000, "cpu")["key_cache"])


def test_issue_15_operators_are_judged_on_every_shape_and_on_their_median_attainment():
    def rec(shape, impl, kind, t, roof, floor=1.5):
        return {"op": "l2_norm", "shape": shape, "impl": impl, "kind": kind, "t_us": t, "dims": {"T": 8, "H": 128},
                "t_roof_us": roof, "t_floor_us": floor, "error": None}
    recs = [rec("A", "seed", "seed", 2.0, 0.1), rec("A", "compile", "baseline", 2.2, 0.1),
            rec("B", "seed", "seed", 10.0, 7.0), rec("B", "compile", "baseline", 9.0, 7.0),
            rec("C", "seed", "seed", 5.0, 4.0), rec("C", "eager", "baseline", 4.0, 4.0)]
    recs[-1]["error"], recs[-1]["t_us"] = "wrong result", None          # a failed baseline never counts
    got = {w: (m, d) for w, m, d in br.targets("l2_norm", br.by_shape(recs, "l2_norm"))}
    assert got[">= 1.0x the best baseline on every hot shape"][0] is False        # B: 9.0 against 10.0
    assert "0.90x at B" in got[">= 1.0x the best baseline on every hot shape"][1]
    assert got["median attainment >= 0.6 (latency floor)"] == (True, "0.750 over 3 shapes")   # 0.75, 0.7, 0.8
    assert br.ratio_bar("l2_norm", {}) == 1.0 and br.ratio_bar("fused_moe", {}) is None
    assert br.ratio_bar("rms_norm", {}) == 1.02


@pytest.mark.interpreter
def test_an_in_place_operator_is_checked_on_its_first_inputs_after_earlier_timings_changed_them(monkeypatch):
    """causal_conv1d_update shifts its state on every call: the seed's timing leaves the input sets changed, and
    the next implementation's check must still start from the inputs the expected result came from. The GPU
    timer is replaced by calls that mutate the sets as its replays do."""
    import dataclasses
    import io
    from agent.studies import measure_baselines as mb
    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator

    def fake_time(rec, fn, prepare, sets, eager=True):
        for s in sets:
            for _ in range(3):
                fn(**(prepare(s) if prepare else s))
        rec.t_us, rec.mode = 1.0, "graph"
    monkeypatch.setattr(mb, "_time", fake_time)
    spec = load_operator("causal_conv1d_update")
    shape = spec.select("hot")[0]
    small = dataclasses.replace(shape, dims=tuple(spec.interpreter_dims(shape.dim).items()), dtype="fp32")
    recs = mb.measure_op(spec, [small], study_hardware("h200"), None, "cpu", variants=False, slow=False,
                         dry_run=False, only={"eager"}, log=io.StringIO())
    assert [(r.impl, r.error) for r in recs] == [("seed", None), ("eager", None)]


def test_the_run_floor_is_the_median_of_its_measurements():
    """One floor scales every decode shape's attainment in a run, and one measurement can sit 15% off its
    process's median (session 40); the run takes the median of several and keeps them all."""
    from agent.studies.measure_baselines import run_floor_s
    draws = iter([1.5e-6, 1.37e-6, 1.58e-6, 1.47e-6, 1.0e-6])
    floor, taken = run_floor_s(lambda: next(draws), 5)
    assert floor == pytest.approx(1.47e-6)
    assert taken == [1.5e-6, 1.37e-6, 1.58e-6, 1.47e-6, 1.0e-6]
    assert run_floor_s(lambda: 2e-6, 1) == (2e-6, [2e-6])


def test_the_report_names_the_floors_spread_when_the_run_took_several():
    from benchmarks.hardware import load_hardware
    recs = [_rec("T16", "seed", "seed", 2.0, {"T": 16, "I": 256}),
            _rec("T16", "compile", "baseline", 1.8, {"T": 16, "I": 256})]
    hw = load_hardware("h200")
    text = br.render(recs, {"floor_us": 1.31, "floor_samples_us": [1.29, 1.31, 1.35]}, hw)
    assert "latency floor 1.31 us measured in the same process (the median of 3 measurements, 1.29-1.35 us)." in text
    assert "the median of" not in br.render(recs, {"floor_us": 1.31, "floor_samples_us": [1.31]}, hw)
    merged = {"runs": [{"command": "a", "floor_us": 1.3, "floor_samples_us": [1.28, 1.3, 1.33]}, {"command": "b"}]}
    assert "latency floor 1.30 us (the median of 3 measurements, 1.28-1.33 us);" in br.render(recs, merged, hw)


def test_floor_samples_below_one_are_refused(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "x.md"), "--dry-run", "--floor-samples", "0"]) == 2
    assert "--floor-samples 0 must be at least 1" in capsys.readouterr().err
