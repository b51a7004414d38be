"""The one loader of `--weights FILE` (benchmarks/weights_file.py): operators and shapes checked, weights moved onto
the shapes whose dims the traces ran, and the errors that name the file, the value and the fix."""
from __future__ import annotations

import pytest

from weights_files import entry, write_weights

from benchmarks.registry import load_operator
from benchmarks.weights_file import load_weights_file, reweighted_score
from benchmarks.weights_trace import WeightsFileError

RMS = load_operator("rms_norm")
DECODE = RMS.select("decode")


def test_all_weight_on_one_shape_moves_the_score_to_that_shape(tmp_path):
    one = DECODE[1]
    f = load_weights_file(write_weights(tmp_path / "w.json", [entry("rms_norm", one, 0.6),
                                                              {"op": "unmapped", "shape": "unknown", "dims": {},
                                                               "phase": "decode", "time_us": 40, "weight": 0.4}]))
    shapes = f.reweigh("rms_norm", DECODE, RMS.shapes)
    assert [s.weight for s in shapes] == [0.6 if s.id == one.id else 0.0 for s in DECODE]
    assert [s.id for s in shapes] == [s.id for s in DECODE] and f.note("rms_norm") is None
    per_shape = {s.id: 0.1 * (i + 1) for i, s in enumerate(DECODE)}
    before = reweighted_score(per_shape, {s.id: s.weight for s in DECODE})
    after = reweighted_score(per_shape, {s.id: s.weight for s in shapes})
    assert after == pytest.approx(per_shape[one.id]) and after != pytest.approx(before)
    assert f.operator_weights("decode", ["rms_norm", "gemm"]) == {"rms_norm": 0.6, "gemm": 0.0}
    assert f.reweigh("gemm", load_operator("gemm").shapes) == load_operator("gemm").shapes   # nothing said of gemm
    assert "no shape entries for gemm" in f.note("gemm")


def test_unknown_operator_unknown_shape_and_no_positive_total_are_errors_with_a_fix(tmp_path):
    with pytest.raises(WeightsFileError, match=r"names operator\(s\) aka does not know: flash_attn .*kernel_map"):
        load_weights_file(write_weights(tmp_path / "a.json", [{**entry("rms_norm", DECODE[0], 0.5), "op": "flash_attn"},
                                                              entry("rms_norm", DECODE[0], 0.5)]))
    with pytest.raises(WeightsFileError, match="sum to 0, not a positive total"):
        load_weights_file(write_weights(tmp_path / "b.json", [entry("rms_norm", DECODE[0], 0.0)]))
    with pytest.raises(WeightsFileError, match="finite weight >= 0"):
        load_weights_file(write_weights(tmp_path / "c.json", [entry("rms_norm", DECODE[0], -1.0)]))
    odd = {**entry("rms_norm", DECODE[0], 0.5), "shape": "T37-H4096", "dims": {"T": 37, "H": 4096}}
    f = load_weights_file(write_weights(tmp_path / "d.json", [odd, entry("rms_norm", DECODE[0], 0.5)]))
    with pytest.raises(WeightsFileError, match=r"T37-H4096 \(decode, weight 0.5\); add them to "
                                               r"benchmarks/operators/rms_norm/shapes.yaml"):
        f.reweigh("rms_norm", DECODE, RMS.shapes)
    assert f.operator_weights("decode", ["rms_norm"]) == {"rms_norm": 1.0}   # w_i needs no shape of the benchmark
    prefill_only = load_weights_file(write_weights(tmp_path / "e.json", [entry("rms_norm", RMS.select("prefill")[0], 1)]))
    with pytest.raises(WeightsFileError, match="chosen shape.* no weight.*choose the shape set the traces cover"):
        prefill_only.reweigh("rms_norm", DECODE, RMS.shapes)
