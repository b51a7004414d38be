"""agent/studies/tolerance_margins.py: the margin is the gate's own bound (1.0 at the edge), and a real run under
the interpreter finds the seed and the honest corpus file of an operator, with their margins below the edge."""
import json
import math

import pytest
import torch

from agent.studies import tolerance_margins as tm
from benchmarks.spec import Tolerance
from sandbox import correctness as cx


@pytest.mark.parametrize("frac", [0.25, 0.9, 2.0])
def test_the_margin_is_the_worst_element_over_its_bound(frac):
    tol = Tolerance(atol=1e-3, rtol=1e-2, rel_l2=1.0)
    ref = torch.tensor([1.0, -2.0, 4.0], dtype=torch.float64)
    out = ref.clone()
    out[1] += frac * (1e-3 + 1e-2 * 2.0)                 # the element at frac of its bound; the others exact
    st = cx.compare(out, ref, tol)
    assert st.passed == (frac <= 1)
    assert tm.margin_of([st], [tol]) == pytest.approx(frac)


def test_the_scale_and_rel_l2_count_as_the_gate_counts_them():
    tol = Tolerance(atol=0.0, rtol=1e-2, rel_l2=1e-3)
    ref = torch.tensor([0.01, 100.0], dtype=torch.float64)
    out = torch.tensor([0.05, 100.0], dtype=torch.float64)   # 0.04 off an element of 0.01 ...
    scale = torch.tensor([10.0, 100.0])                       # ... whose terms summed to 10: bound 0.1
    st = cx.compare(out, ref, tol, scale=scale)
    assert st.passed
    elem = 0.04 / 0.1
    l2 = 0.04 / math.hypot(0.01, 100.0) / 1e-3
    assert tm.margin_of([st], [tol]) == pytest.approx(max(elem, l2))
    exact = cx.compare(ref, ref, tol)
    assert tm.margin_of([exact], [tol]) == 0.0
    masked = torch.tensor([-math.inf, 1.0], dtype=torch.float64)      # a matched -inf (top_k's filtered logits)
    assert tm.margin_of([cx.compare(masked.clone(), masked, tol)], [tol]) == 0.0


@pytest.mark.interpreter
def test_a_run_times_the_seed_and_the_honest_corpus_file(tmp_path):
    out = tmp_path / "m.json"
    assert tm.main(["--ops", "causal_conv1d_update", "--draws", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["source"] for r in rows] == ["seed", "causal_conv1d_update_state_tile_barrier"]
    for r in rows:
        # two visible shapes and the operator's hold-outs of one draw; honest kernels inside the bounds
        assert r["calls"] >= 3 and r["failures"] == [] and 0 < r["margin"] < 1, r


def test_an_unknown_operator_is_an_error_that_lists_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        tm.main(["--ops", "no_such_op"])
    err = capsys.readouterr().err
    assert "no_such_op" in err and "rms_norm" in err


def test_gpu_mode_without_a_gpu_says_so(capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the mode runs (test_a_gpu_run_at_full_size)")
    with pytest.raises(SystemExit):
        tm.main(["--ops", "rms_norm", "--gpu"])
    assert "--gpu needs a CUDA GPU" in capsys.readouterr().err


def test_gpu_mode_plans_full_size_hot_shapes_in_their_dtypes():
    from benchmarks.registry import load_operator
    spec = load_operator("causal_conv1d")
    cases = tm.shapes_for(spec, 1, gpu=True)
    hot = spec.select("hot")
    assert [(c[0], c[1], c[2]) for c in cases[:len(hot)]] == [(s.id, dict(s.dim), s.dtype) for s in hot]
    assert all(c[0].startswith("holdout") for c in cases[len(hot):]) and len(cases) > len(hot)
    assert {c[2] for c in cases} == {s.dtype for s in hot}
    assert all(c[2] == "fp32" for c in tm.shapes_for(spec, 1))


@pytest.mark.gpu
def test_a_gpu_run_at_full_size(tmp_path):
    out = tmp_path / "g.json"
    assert tm.main(["--ops", "causal_conv1d_update", "--draws", "1", "--gpu", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert rows[0]["source"] == "seed" and all(r["failures"] == [] and 0 < r["margin"] < 1 for r in rows), rows
