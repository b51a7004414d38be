"""The A/B acceptance rule on synthetic sample lists (agent/acceptance.py states the rule)."""
import math
import random
import re

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


# ---------------------------------------------------------------- the one-worker A/B statistic

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from agent.acceptance import (RULE_AB_ONE_WORKER, RULE_CONFIRM, confirm_decision, paired_decision,  # noqa: E402
                              sign_flip_p)

ALPHA = 0.01          # the configured default (agent/config.py AcceptanceConfig.alpha)
ROUNDS = 30           # the default sandbox.ab_rounds


def _h200_noise() -> tuple[np.ndarray, np.ndarray]:
    """(weights, relative noise per shape): the spread of one kernel measured twice in fresh workers on the
    H200 (benchmarks/results/sandbox_h200_records/spread.json), |t1 - t2| / mean per shape. Within one
    worker the round-to-round noise is smaller; using the cross-process spread makes the test harder."""
    import json
    path = Path(__file__).resolve().parents[2] / "benchmarks/results/sandbox_h200_records/spread.json"
    runs = json.loads(path.read_text())["rms_norm"]
    first = {s["id"]: s for s in runs[0]["shapes"] if not s["holdout"]}
    second = {s["id"]: s for s in runs[1]["shapes"] if not s["holdout"]}
    ids = sorted(first)
    w = np.array([first[i]["weight"] for i in ids])
    t1, t2 = np.array([first[i]["t_us"] for i in ids]), np.array([second[i]["t_us"] for i in ids])
    return w / w.sum(), np.abs(t1 - t2) / ((t1 + t2) / 2)


def _series(rng, gain: float, noise_scale: float = 1.0, rounds: int = ROUNDS):
    """Per-round scores of A and B: per shape and round, lognormal noise with the H200 spread, and a drift
    shared by both kernels of a round (clocks, temperature); B's attainment is (1 + gain) times A's."""
    w, sigma = _h200_noise()
    base = np.full(len(w), 0.7)
    drift = rng.normal(0.0, 0.01, size=(rounds, 1))
    a_att = base * np.exp(drift + rng.normal(0.0, 1.0, (rounds, len(w))) * sigma * noise_scale)
    b_att = base * (1 + gain) * np.exp(drift + rng.normal(0.0, 1.0, (rounds, len(w))) * sigma * noise_scale)
    return list((np.minimum(a_att, 1) * w).sum(axis=1)), list((np.minimum(b_att, 1) * w).sum(axis=1))


def _accept_rate(gain: float, sims: int, noise_scale: float = 1.0, seed: int = 1) -> float:
    rng = np.random.default_rng(seed)
    return float(np.mean([paired_decision(*_series(rng, gain, noise_scale), alpha=ALPHA).accept
                          for _ in range(sims)]))


def test_sign_flip_p_is_exact_on_small_samples():
    assert sign_flip_p([1.0, 1.0, 1.0, 1.0]) == pytest.approx(1 / 16)   # only the identity pattern is as large
    assert sign_flip_p([-1.0, -1.0, -1.0, -1.0]) == 1.0
    assert sign_flip_p([1.0, -1.0, 1.0, -1.0]) > 0.5
    assert sign_flip_p([float("nan"), 1.0]) == 1.0


def test_sign_flip_p_is_uniform_enough_under_the_null():
    """Equal kernels: p < alpha in about alpha of the cases (the test's level), exact and sampled regimes."""
    rng = np.random.default_rng(7)
    for n in (12, 30):
        ps = np.array([sign_flip_p(rng.normal(size=n), draws=2000) for _ in range(400)])
        assert np.mean(ps < 0.05) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)
        assert np.mean(ps < 0.5) == pytest.approx(0.5, abs=0.1)


def test_equal_kernels_are_refused_at_the_stated_rate():
    rate = _accept_rate(0.0, 400)
    # at most alpha, with three binomial standard errors of slack for 400 simulations
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 400)


def test_a_two_percent_gain_on_h200_noise_is_accepted_at_least_95_percent_of_the_time():
    assert _accept_rate(0.02, 200) >= 0.95


def test_a_one_percent_gain_is_usually_seen_and_a_slower_kernel_never_accepted():
    assert _accept_rate(0.01, 200) >= 0.5
    assert _accept_rate(-0.01, 200) == 0.0


def test_noise_three_times_the_h200_spread_does_not_raise_false_accepts():
    assert _accept_rate(0.0, 300, noise_scale=3.0, seed=3) <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 300)


def test_paired_decision_records_its_statistic_and_min_gain_applies():
    a = [0.70 + 0.001 * (k % 3) for k in range(ROUNDS)]
    c = [x * 1.05 for x in a]
    d = paired_decision(a, c, alpha=ALPHA)
    assert d.accept and d.rule == RULE_AB_ONE_WORKER and d.details["p_value"] < ALPHA
    assert d.details["mean_ratio"] == pytest.approx(1.05)
    assert not paired_decision(a, c, alpha=ALPHA, min_gain=0.1).accept
    with pytest.raises(ValueError, match=">= 4 rounds"):
        paired_decision(a[:3], c[:3], alpha=ALPHA)
    assert not paired_decision(a[:-1] + [float("nan")], c, alpha=ALPHA).accept


def test_the_fresh_process_confirmation_can_only_take_an_acceptance_back():
    a = [0.70] * 10
    won = paired_decision(a, [0.75] * 10, alpha=ALPHA)
    assert confirm_decision(won, 0.74, margin=0.005).accept
    refused = confirm_decision(won, 0.69, margin=0.005)
    assert not refused.accept and refused.rule == RULE_CONFIRM
    assert not confirm_decision(won, None, margin=0.005).accept
    lost = paired_decision(a, a, alpha=ALPHA)
    assert confirm_decision(lost, 0.99, margin=0.005) is lost


def test_one_worker_decision_scores_rounds_with_the_rooflines_of_the_run():
    """A synthetic ABSeries (per-round seconds per shape) on rms_norm's hot shapes: the candidate 4% faster
    on every shape is accepted, the same kernel twice is not, a series that did not finish is refused."""
    from types import SimpleNamespace

    from agent.acceptance import one_worker_decision, round_scores
    from benchmarks.hardware import load_hardware
    from benchmarks.registry import load_operator
    from sandbox.ab import ABSeries
    shapes = load_operator("rms_norm").select("hot")
    hw = load_hardware("h200")
    rng = np.random.default_rng(0)
    base = [40e-6 * (1 + i) for i in range(len(shapes))]
    a = tuple(tuple(t * (1 + rng.normal(0, 0.005)) for _ in range(ROUNDS)) for t in base)
    b = tuple(tuple(t / 1.04 * (1 + rng.normal(0, 0.005)) for _ in range(ROUNDS)) for t in base)
    ids = tuple(s.id for s in shapes)
    cfg = SimpleNamespace(alpha=ALPHA, min_gain=0.0)
    faster = one_worker_decision(ABSeries(ids, a, b, ROUNDS, floor_s=1.4e-6), shapes, hw, "rms_norm", cfg)
    assert faster.accept and faster.details["mean_ratio"] == pytest.approx(1.04, abs=0.01)
    same = one_worker_decision(ABSeries(ids, a, a, ROUNDS, floor_s=1.4e-6), shapes, hw, "rms_norm", cfg)
    assert not same.accept
    sa, sb = round_scores(ABSeries(ids, a, b, ROUNDS, floor_s=1.4e-6), shapes, hw, "rms_norm")
    assert len(sa) == ROUNDS and all(0 < x <= 1 for x in sa + sb)
    broken = one_worker_decision(ABSeries(ids[:2], a[:2], b[:2], ROUNDS, error="timing: boom"), shapes, hw,
                                 "rms_norm", cfg)
    assert not broken.accept and "boom" in broken.reason


def _one_worker_scored_sandbox():
    """The loop tests' ScoredSandbox (the real sandbox under the interpreter for every verdict, a timing model
    for attainment) with a one-worker A/B whose series follows that model."""
    from test_loop import ScoredSandbox, rows_attainment

    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    from sandbox.ab import ABSeries

    class OneWorkerScoredSandbox(ScoredSandbox):
        def __init__(self):
            super().__init__()
            self.ab_calls = []

        def measure_ab(self, req, other_source):
            self.ab_calls.append((req, other_source))
            spec, rng = load_operator(req.op), np.random.default_rng(len(self.ab_calls))
            times = []
            for src in (req.source, other_source):
                times.append(tuple(tuple(roofline(*spec.work(s), req.hardware).t_roof_s / rows_attainment(src, s.dim["H"])
                                         * float(np.exp(rng.normal(0, 0.002))) for _ in range(ROUNDS))
                                   for s in req.shapes))
            return ABSeries(tuple(s.id for s in req.shapes), times[0], times[1], ROUNDS, floor_s=1e-12)

    return OneWorkerScoredSandbox()


@pytest.mark.interpreter
def test_the_loop_decides_on_the_one_worker_ab_and_confirms_in_a_fresh_process(tmp_path):
    """The real sandbox for every verdict (interpreter), the loop tests' timing model for attainment, and an
    A/B series built from that model: the faster candidate wins its paired test and its confirmation (a fresh
    timing-only evaluation is recorded), the slower one loses its paired test (the screen is off)."""
    from test_loop import RecordingProposer, config, make_candidates, make_loop

    from agent.budget import BudgetLimits

    c = make_candidates(tmp_path / "cands")
    proposer = RecordingProposer([str(c["faster.py"]), str(c["slower.py"])])
    sandbox = _one_worker_scored_sandbox()
    loop, audit = make_loop(tmp_path, proposer, cfg=config(tmp_path, "acceptance.screen=false"), evaluate=sandbox,
                            limits=BudgetLimits(iterations=2))
    loop.run()
    decisions = [r.body["decision"] for r in audit.records("run-1", "iteration")][1:]
    assert [d["rule"] for d in decisions] == [RULE_AB_ONE_WORKER, RULE_AB_ONE_WORKER]
    assert decisions[0]["accept"] and "confirmed in a fresh process" in decisions[0]["reason"]
    assert not decisions[1]["accept"] and decisions[1]["p_value"] >= ALPHA
    roles = [r.body["role"] for r in audit.records("run-1", "evaluation")]
    assert roles.count("ab_confirm") == 1 and "ab_incumbent" not in roles
    assert len(sandbox.ab_calls) == 2 and not any(req.correctness for req, _ in sandbox.ab_calls)


@pytest.mark.interpreter
def test_the_winners_confirmation_is_the_bar_of_the_next_timed_screens(tmp_path):
    """Timing first: the seed is timed alone once for the screens' bar; after the faster candidate wins, its
    fresh-process confirmation (a timing-only evaluation, as the bar is) becomes the bar, so the new incumbent
    is not timed alone a second time, and the slower candidate is screened out against that score."""
    from test_loop import RecordingProposer, config, make_candidates, make_loop

    from agent.budget import BudgetLimits

    c = make_candidates(tmp_path / "cands")
    proposer = RecordingProposer([str(c["faster.py"]), str(c["slower.py"])])
    loop, audit = make_loop(tmp_path, proposer, cfg=config(tmp_path, "acceptance.timing_first=always"),
                            evaluate=_one_worker_scored_sandbox(), limits=BudgetLimits(iterations=2))
    loop.run()
    evaluations = [r.body for r in audit.records("run-1", "evaluation")]
    roles = [e["role"] for e in evaluations]
    assert roles.count("screen_incumbent") == 1 and roles.count("screen") == 2 and roles.count("ab_confirm") == 1
    decisions = [r.body["decision"] for r in audit.records("run-1", "iteration")][1:]
    assert decisions[0]["accept"] and "confirmed in a fresh process" in decisions[0]["reason"]
    assert decisions[1]["rule"] == "timed-screen" and not decisions[1]["accept"]
    confirmed = re.search(r"confirmed in a fresh process \((\d\.\d+) ", decisions[0]["reason"]).group(1)
    assert f"(incumbent {confirmed} " in decisions[1]["reason"], (decisions[0]["reason"], decisions[1]["reason"])
