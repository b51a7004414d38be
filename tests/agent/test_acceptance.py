"""The A/B acceptance rule on synthetic sample lists (agent/acceptance.py states the rule)."""
import math
import random

import pytest

from agent.acceptance import (RULE_AB, RULE_INTERPRETER, RULE_SCREEN, ab_decision, correctness_only_decision,
                              measure_ab, review_flags, screen_decision, spread)
from sandbox.verdict import EvalResult, ShapeResult


def test_spread_is_range_below_five_samples_and_iqr_from_five():
    assert spread([0.50, 0.52, 0.47]) == pytest.approx(0.05)
    # 5 samples: inclusive quartiles of 1..5 are 2 and 4 -> IQR 2, the outlier 100 does not widen it
    assert spread([1, 2, 3, 4, 100]) == pytest.approx(2.0)
    assert spread([0.3]) == 0.0


def test_clear_gain_beyond_noise_is_accepted():
    d = ab_decision([0.50, 0.51, 0.49], [0.60, 0.61, 0.59])
    assert d.accept and d.rule == RULE_AB
    assert d.gain == pytest.approx(0.10)
    assert d.noise == pytest.approx(0.02)
    assert d.pairs_won == 3


def test_gain_inside_the_noise_is_rejected_even_when_every_pair_is_won():
    # candidate wins each pair by 0.01, but either side scatters by 0.04
    d = ab_decision([0.50, 0.54, 0.52], [0.51, 0.55, 0.53])
    assert not d.accept
    assert d.gain == pytest.approx(0.01)
    assert "noise" in d.reason


def test_one_lost_pair_rejects_despite_a_better_median():
    d = ab_decision([0.50, 0.50, 0.70], [0.80, 0.80, 0.60])
    assert not d.accept
    assert d.pairs_won == 2
    assert "lost 1 of 3" in d.reason


def test_min_gain_is_a_floor_on_top_of_noise():
    a, c = [0.50, 0.50, 0.50], [0.52, 0.52, 0.52]
    assert ab_decision(a, c, min_gain=0.0).accept
    d = ab_decision(a, c, min_gain=0.05)
    assert not d.accept and "min_gain" in d.reason


def test_identical_kernels_under_pure_noise_are_almost_never_accepted():
    """The same kernel measured twice (only noise differs) must not pass: at most 2^-3 by the sign test,
    and the range bar makes it rarer still. Seeded, so the count is reproducible."""
    rng = random.Random(1234)
    accepted = 0
    trials = 2000
    for _ in range(trials):
        a = [0.6 + rng.gauss(0, 0.01) for _ in range(3)]
        c = [0.6 + rng.gauss(0, 0.01) for _ in range(3)]
        accepted += ab_decision(a, c).accept
    assert accepted / trials < 1 / 8


def test_nan_sample_rejects():
    d = ab_decision([0.5, 0.5, 0.5], [0.9, math.nan, 0.9])
    assert not d.accept and "finite" in d.reason


def test_unequal_sample_counts_are_a_usage_error():
    with pytest.raises(ValueError, match="same number"):
        ab_decision([0.5, 0.5], [0.6])


def test_without_timing_a_correct_candidate_is_never_accepted():
    d = correctness_only_decision("a" * 64, "b" * 64)
    assert not d.accept and d.rule == RULE_INTERPRETER and "GPU" in d.reason
    d = correctness_only_decision("a" * 64, "a" * 64)
    assert not d.accept and d.rule == RULE_INTERPRETER
    assert correctness_only_decision("a" * 64, "b" * 64, accept_correct=True).accept
    assert not correctness_only_decision("a" * 64, "a" * 64, accept_correct=True).accept


def _result(score: float | None, ok: bool = True) -> EvalResult:
    return EvalResult(op="x", verdict="accepted" if ok else "rejected",
                      shapes=[ShapeResult(id="s", dims={"T": 1}, dtype="fp32", weight=1.0, attainment=score)])


def test_measure_ab_interleaves_and_turns_failures_into_nan():
    order = []

    def inc(k):
        order.append(("A", k))
        return _result(0.5)

    def cand(k):
        order.append(("B", k))
        return _result(0.7, ok=k != 1)   # the second candidate re-measure crashes

    a, c, results = measure_ab(inc, cand, lambda r: r.shapes[0].attainment, 3)
    assert order == [("A", 0), ("B", 0), ("A", 1), ("B", 1), ("A", 2), ("B", 2)]
    assert a == [0.5, 0.5, 0.5]
    assert c[0] == 0.7 and math.isnan(c[1]) and c[2] == 0.7
    assert [role for role, _ in results] == ["ab_incumbent", "ab_candidate"] * 3
    assert not ab_decision(a, c).accept


def test_a_tenfold_speedup_over_the_incumbent_is_flagged_for_review():
    def result(times):
        return EvalResult(op="x", verdict="accepted", shapes=[
            ShapeResult(id=i, dims={"T": 1}, dtype="bf16", weight=1.0, t_us=t) for i, t in times.items()] + [
            ShapeResult(id="hidden", dims={"T": 3}, dtype="bf16", weight=0.0, t_us=0.001, holdout=True)])
    inc = result({"a": 100.0, "b": 50.0})
    flags = review_flags(inc, result({"a": 9.0, "b": 40.0}))
    assert len(flags) == 1 and "shape a" in flags[0] and "11.1x" in flags[0]
    assert review_flags(inc, result({"a": 11.0, "b": 6.0})) == []          # 9.1x and 8.3x: not flagged
    assert review_flags(None, result({"a": 1.0})) == []                     # the seed has no incumbent


def test_the_screen_rejects_only_clear_losses_and_never_accepts():
    lost = screen_decision(0.70, 0.80, 0.005)
    assert lost is not None and not lost.accept and lost.rule == RULE_SCREEN and lost.candidate == (0.70,)
    assert "0.7000" in lost.reason and "0.7960" in lost.reason          # the first score and the bar it missed
    assert screen_decision(0.799, 0.80, 0.005) is None                  # within the margin: goes on to its A/B
    assert screen_decision(0.81, 0.80, 0.005) is None                   # reads better: goes on to its A/B
    assert screen_decision(0.80, 0.80, 0.0) is not None                 # no margin: a tie is not a gain
    assert screen_decision(0.799, 0.80, -1.0) is not None               # a negative margin counts as 0
