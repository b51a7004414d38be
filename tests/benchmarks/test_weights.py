import pytest
import yaml

from benchmarks.registry import list_operators, load_operator
from benchmarks.weights import compute, load_mix


@pytest.fixture(scope="module")
def computed():
    mix, models = load_mix()
    return mix, models, compute(mix, models, list_operators())


def test_weights_sum_to_one_over_all_shapes(computed):
    _, _, by_op = computed
    assert sum(r.weight for rows in by_op.values() for r in rows) == pytest.approx(1.0)


def test_committed_shapes_are_what_the_script_generates(computed):
    """shapes.yaml must be regenerated whenever the mix, the models or an operator's occurrences change."""
    _, _, by_op = computed
    for op, rows in by_op.items():
        committed = {s.id: s for s in load_operator(op).shapes}
        assert set(committed) == {r.id for r in rows}, f"{op}: run python3 -m benchmarks.weights --write"
        for r in rows:
            assert committed[r.id].weight == pytest.approx(r.weight, rel=1e-4)
            assert committed[r.id].hot == r.hot


def test_hot_set_rule(computed):
    mix, _, by_op = computed
    for op, rows in by_op.items():
        hot = [r for r in rows if r.hot]
        assert len(hot) <= mix["hot_max"] + 2 * mix["hot_min_per_phase"]
        for phase in ("decode", "prefill"):
            assert sum(r.phase == phase for r in hot) >= min(mix["hot_min_per_phase"],
                                                            sum(r.phase == phase for r in rows))
        # hot shapes are never lighter than a non-hot shape of the same phase
        for phase in ("decode", "prefill"):
            h = [r.weight for r in hot if r.phase == phase]
            c = [r.weight for r in rows if not r.hot and r.phase == phase]
            if h and c:
                assert min(h) >= max(c)


def test_weight_is_proportional_to_the_stated_formula(tmp_path):
    """A hand-sized mix: one model, one token count; each operator's calls per pass scale its weight."""
    mix, models = load_mix()
    one = {"models": {"llama-3.1-8b": {"tp": 1, "share": 1.0}},
           "phases": {"prefill": {"share": 1.0, "tokens": {4096: 1.0}}},
           "hardware": "h200", "launch_floor_us": 2.0}
    by_op = compute(one, models, ["rms_norm", "silu_and_mul"])
    (rms,), (silu,) = by_op["rms_norm"], by_op["silu_and_mul"]
    # rms_norm: 1 call of T=4096,H=4096 (layer 0's input norm; the other 64 fuse the residual add and are
    # fused_add_rms_norm's): Q = 2*4096*4096*2 + 4096*2 bytes at 4.8 TB/s
    t_rms = 1 * (2 * 4096 * 4096 * 2 + 4096 * 2) / 4.8e12
    # silu_and_mul: 32 calls of T=4096, I=14336: Q = 3*4096*14336*2 bytes
    t_silu = 32 * (3 * 4096 * 14336 * 2) / 4.8e12
    assert rms.weight == pytest.approx(t_rms / (t_rms + t_silu), rel=1e-3)
    assert silu.weight == pytest.approx(t_silu / (t_rms + t_silu), rel=1e-3)


def test_every_mix_model_is_known():
    mix, models = load_mix()
    assert set(mix["models"]) <= set(models)
