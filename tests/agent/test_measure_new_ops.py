"""The CPU-runnable parts of agent/studies/measure_new_ops.py: shape picking, attainment, the best
alternative, the markdown, and a clean usage exit without a GPU."""
import pytest
import torch

from agent.studies import measure_new_ops as m
from benchmarks.registry import list_operators, load_operator
from benchmarks.spec import Shape


def test_every_new_op_exists_and_has_hot_shapes():
    assert set(m.NEW_OPS) <= set(list_operators())
    for op in m.NEW_OPS:
        assert m.pick_shapes(load_operator(op).shapes, 4)


def test_pick_shapes_keeps_both_phases_heaviest_first():
    shapes = [Shape.make(f"d{i}", {"T": i}, phase="decode", weight=i, hot=True) for i in range(1, 6)]
    shapes += [Shape.make(f"p{i}", {"T": 100 + i}, phase="prefill", weight=i / 10, hot=True) for i in range(1, 4)]
    shapes.append(Shape.make("cold", {"T": 999}, phase="decode", weight=100, hot=False))
    got = [s.id for s in m.pick_shapes(shapes, 4)]
    assert got == ["d5", "d4", "p3", "p2"]
    assert [s.id for s in m.pick_shapes(shapes[5:8], 4)] == ["p3", "p2", "p1"]     # prefill-only operator


def test_attainment_uses_the_floor_and_caps_at_one():
    assert m.attainment(10.0, 4.0, 1.5) == pytest.approx(0.4)
    assert m.attainment(3.0, 0.2, 1.5) == pytest.approx(0.5)        # T_ref = max(T_roof, floor)
    assert m.attainment(1.0, 4.0, 1.5) == 1.0
    assert m.attainment(None, 4.0, 1.5) is None


def _row():
    return {"op": "softmax", "shape": "T64-V151936", "phase": "decode", "t_roof_us": 12.0, "attainment": 0.6,
            "contenders": {"seed": {"t_us": 20.0, "ok": True, "mode": "graph"},
                           "eager": {"t_us": 30.0, "ok": True, "mode": "graph"},
                           "compile": {"t_us": 15.0, "ok": False, "mode": "graph"},
                           "liger": {"t_us": 10.0, "ok": True, "mode": "graph", "other_contract": True}}}


def test_best_other_ignores_wrong_and_other_contract_results():
    assert m.best_other(_row()) == ("eager", 30.0)


def test_markdown_table():
    text = m.render_markdown({"command": "python -m agent.studies.measure_new_ops --out x", "ops": ["softmax"],
                              "rows": [_row()], "floor_us": 1.4, "hardware": "h200", "gpu": "H200", "torch": "2.11",
                              "triton": "3.6", "liger": "absent"})
    assert "## softmax" in text and "median seed attainment 0.60" in text
    assert "| T64-V151936 | decode | 12.00 | 20.00 | 30.00 | 15.00 WRONG | 10.00 * | eager | 0.67 | 0.60 |" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit")
def test_without_a_gpu_it_exits_2(tmp_path, capsys):
    assert m.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def _hf_rope(q, k, cos, sin):
    """A stand-in for Liger's RoPE in HF's layout ([1, heads, T, D] views, half-width cos/sin), in torch."""
    def rot(x):
        x1, x2 = x.float()[..., : x.shape[-1] // 2], x.float()[..., x.shape[-1] // 2:]
        c, s = cos[:, None], sin[:, None]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).to(x.dtype)
    qo, ko = rot(q), rot(k)
    T = qo.shape[2]
    return qo.transpose(1, 2).reshape(T, -1), ko.transpose(1, 2).reshape(T, -1)


def test_a_library_on_converted_inputs_is_checked_against_the_operators_own():
    """Liger's rotary takes HF-layout copies (baseline_liger_inputs): the check must compute the expected
    result from the operator's inputs, not call the reference with the library's keywords (a TypeError that
    left rotary_embedding without a Liger number on the H200)."""
    spec = load_operator("rotary_embedding")
    dims, dtype = {"T": 5, "Hq": 4, "Hk": 2, "D": 16}, "fp32"
    inputs = spec.make_inputs(dims, dtype, seed=3)
    converted = spec.module.baseline_liger_inputs(**inputs)
    ok, tensors = m._check(lambda i: _hf_rope(**i), converted, inputs, spec, dims, dtype)
    assert ok and len(tensors) == 2
    wrong = lambda i: tuple(t * 1.01 for t in _hf_rope(**i))
    assert m._check(wrong, converted, inputs, spec, dims, dtype)[0] is False


def test_max_shapes_zero_picks_every_hot_shape():
    spec = load_operator("layer_norm")
    hot = [s for s in spec.shapes if s.hot]
    assert len(m.pick_shapes(spec.shapes, 0)) == len(hot) > 3


def test_the_variant_table_names_the_fastest_of_ours():
    row = dict(_row(), variants={"seed:a": {"t_us": 16.0, "ok": True, "mode": "graph"},
                                 "seed:b": {"t_us": 12.0, "ok": False, "mode": "graph"}})
    assert m.best_variant(row) == ("seed:a", 16.0)
    text = "\n".join(m._variant_table([row]))
    assert "| T64-V151936 | 20.00 | 16.00 | 12.00 WRONG | seed:a | 1.25 | 1.88 |" in text


@pytest.mark.interpreter
def test_dry_run_checks_the_seed_and_every_variant_on_the_cpu(tmp_path):
    import json
    from agent.studies.seed_variants import VARIANTS
    assert m.main(["--out", str(tmp_path), "--ops", "rotary_embedding", "--max-shapes", "2", "--dry-run"]) == 0
    data = json.loads((tmp_path / "new_ops.json").read_text())
    assert data["dry_run"] and len(data["rows"]) == 2
    for row in data["rows"]:
        assert set(row["variants"]) == {f"seed:{n}" for n, _ in VARIANTS["rotary_embedding"]}
        assert all(c["ok"] and c["t_us"] is None for c in [row["contenders"]["seed"], *row["variants"].values()])
    assert f"seed:{VARIANTS['rotary_embedding'][0][0]}" in (tmp_path / "new_ops.md").read_text()


@pytest.mark.interpreter
def test_only_variants_keeps_just_the_named_ones(tmp_path):
    import json
    assert m.main(["--out", str(tmp_path), "--ops", "rotary_embedding", "--max-shapes", "1", "--dry-run",
                   "--only-variants", "pdl,no_such_variant"]) == 0
    row, = json.loads((tmp_path / "new_ops.json").read_text())["rows"]
    assert set(row["variants"]) == {"seed:pdl"} and row["variants"]["seed:pdl"]["ok"]
