"""When a candidate replaces the incumbent: a rule that measurement noise cannot fake.

The sandbox's rule (the loop's evaluator is a sandbox.Sandbox): both kernels, which passed every gate,
are timed in ONE worker over `sandbox.ab_rounds` interleaved rounds (sandbox/ab.py); each round gives
both a score, and `paired_decision` accepts iff a one-sided sign-flip test on d_r = ln(c_r / a_r) has
p < `acceptance.alpha` (the false-accept rate of an equal kernel; README "The A/B statistic") and the
median gain exceeds `acceptance.min_gain`. `confirm_decision` then asks one fresh-process measurement of
the winner to read above the incumbent's A/B median less `acceptance.screen_margin`.

The rule for evaluators that cannot time two kernels in one worker (test fakes), below: a candidate
that passed every sandbox gate is re-measured against the incumbent in interleaved A/B
repeats, A B A B ... (`acceptance.repeats` pairs), each measurement a fresh sandbox process with
correctness off (it was just checked) and hold-out shapes off (they carry no weight). Each
measurement gives one score: the weight-averaged attainment over the run's shapes.

The rule. With incumbent samples a_1..a_n and candidate samples c_1..c_n (pair k measured back to
back, so slow drift of clocks or temperature hits both sides of a pair alike):

    gain  = median(c) - median(a)
    noise = max(spread(a), spread(c)),  spread = interquartile range when n >= 5, else max - min
    accept  iff  c_k > a_k for every pair k   and   gain > max(noise, acceptance.min_gain)

Why both parts. The gain must clear the full spread of either side's repeats: a difference smaller
than the scatter of one kernel measured against itself is not evidence. With 3 repeats an
interquartile range is not defined well enough, so the range (max - min) stands in; it is the more
conservative choice. The every-pair condition is a sign test on the paired differences: a candidate
that lost even one head-to-head (an outlier run, a warm cache on one side) is not accepted, whatever
the medians say. The chance that a kernel no better than the incumbent wins all n pairs by luck is at
most 2^-n (1/8 at the default 3; raise `acceptance.repeats` for a stricter test). With repeats = 1
the spread is 0 and the rule reduces to "strictly higher"; the loop warns when repeats < 3.

The screen (`acceptance.screen`, on by default). A candidate whose first measurement (the full
sandbox evaluation) is below the incumbent's first measurement by more than `acceptance.screen_margin`
(0.5%, relative) is rejected without the A/B repeats. The A/B can only confirm a gain: when the one
measurement shows none, the repeats would cost ~6 sandbox runs of GPU time (about 1.5 minutes on the
H200) to reject it anyway in all but rare noisy cases. The margin lets a candidate that reads slightly
low once, as a real gain near the noise can, still reach its A/B. The screen is one-sided: it never
accepts anything, so it cannot be used to sneak a candidate in.

Timing first (`acceptance.timing_first`, "auto": the offline search on a GPU). The same screen, one step
earlier: the candidate is timed alone (its attribution gate included, no correctness or hold-out trials,
which are most of a full evaluation) and compared with the incumbent timed the same way: the median of its
timings, taken when it became the incumbent and again after every `acceptance.screen_bar_every` screens.
A clearly slower candidate stops there (rule "timed-screen"); one that fails a gate of that
evaluation is rejected at the gate; every other candidate gets the full evaluation, every gate, and then
the screen and the A/B above. Nothing reaches acceptance without every gate.

Interpreter runs (no GPU) have no timing and so no comparable score. By default nothing is accepted
there: a candidate that passes every gate (lint, compile, correctness on visible and hidden shapes) is
recorded as correct but untimed, and the incumbent stays, because no measurement shows it is faster.
`acceptance.untimed=accept-correct` (tests, demos of the loop) accepts a changed correct candidate
instead, and every such record says so. A test (or a caller) that supplies its own score function
gets the A/B rule above.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

from agent.memory import visible_per_shape
from sandbox.verdict import EvalResult

RULE_AB = "ab-interleaved"
RULE_AB_ONE_WORKER = "ab-one-worker"
RULE_CONFIRM = "confirm-fresh-process"
SIGN_FLIP_DRAWS = 20000      # random sign flips beyond EXACT_MAX_ROUNDS (p resolution 5e-5)
EXACT_MAX_ROUNDS = 16        # up to 2^16 sign patterns: enumerated exactly
RULE_INTERPRETER = "interpreter-correctness"
RULE_INCUMBENT_FAILED = "incumbent-failed"
RULE_GATE = "gate"
RULE_SCREEN = "screen"
RULE_TIMED_SCREEN = "timed-screen"      # the timing-only evaluation before the trials (agent/loop.py)
RULE_WINNER_HOLDOUTS = "winner-holdouts"  # a winner's hold-outs at every published shape (agent/loop.py)


@dataclass(frozen=True)
class Decision:
    accept: bool
    rule: str
    reason: str                                  # one line, for the lesson and the audit trail
    incumbent: tuple[float, ...] = ()
    candidate: tuple[float, ...] = ()
    gain: float | None = None
    noise: float | None = None
    pairs_won: int | None = None
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"accept": self.accept, "rule": self.rule, "reason": self.reason, "incumbent": list(self.incumbent),
                "candidate": list(self.candidate), "gain": self.gain, "noise": self.noise,
                "pairs_won": self.pairs_won, **self.details}


def run_score(result: EvalResult | None) -> float | None:
    """The number the loop climbs: weight-averaged attainment over the run's visible shapes (a failed
    shape counts 0). None when a passing shape has no attainment (the interpreter: not comparable)."""
    if result is None or not result.accepted:
        return None if result is None else 0.0
    rows = result.visible_shapes()
    if not rows or any(s.error is None and s.attainment is None for s in rows):
        return None
    total = sum(s.weight for s in rows)
    att = [0.0 if s.error else float(s.attainment) for s in rows]
    if total <= 0:
        return sum(att) / len(att)
    return sum(s.weight * a for s, a in zip(rows, att)) / total


def median_attainment(result: EvalResult | None) -> float | None:
    """S_i over the visible shapes (failed shapes count 0), or None without scores."""
    per = visible_per_shape(result)
    if result is None or not per or len(per) < len(result.visible_shapes()):
        return None
    return float(statistics.median(per.values()))


def spread(samples: Sequence[float]) -> float:
    """Interquartile range for 5 or more samples, else the full range (max - min)."""
    if len(samples) < 2:
        return 0.0
    if len(samples) >= 5:
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        return q3 - q1
    return max(samples) - min(samples)


def screen_decision(first: float, incumbent: float, margin: float) -> Decision | None:
    """A rejection without A/B when the candidate's first score is below the incumbent's by more than
    `margin` (relative); None when the candidate goes on to its A/B."""
    bar = incumbent * (1 - max(0.0, margin))
    if first > bar:
        return None
    return Decision(False, RULE_SCREEN, f"first measurement {first:.4f} <= {bar:.4f} (incumbent {incumbent:.4f} "
                                        f"less acceptance.screen_margin {margin:g}): not re-measured",
                    candidate=(first,))


def ab_decision(incumbent: Sequence[float], candidate: Sequence[float], min_gain: float = 0.0) -> Decision:
    """Apply the A/B rule (module docstring) to paired samples, higher is better."""
    a, c = tuple(float(x) for x in incumbent), tuple(float(x) for x in candidate)
    if not a or len(a) != len(c):
        raise ValueError(f"A/B needs the same number of incumbent and candidate samples (>= 1); got {len(a)} and "
                         f"{len(c)}")
    if not all(math.isfinite(x) for x in a + c):
        return Decision(False, RULE_AB, "a re-measurement gave no finite score", a, c)
    gain = statistics.median(c) - statistics.median(a)
    noise = max(spread(a), spread(c))
    won = sum(ck > ak for ak, ck in zip(a, c))
    bar = max(noise, min_gain)
    if won < len(a):
        reason = f"lost {len(a) - won} of {len(a)} interleaved pairs (median gain {gain:+.4f})"
        return Decision(False, RULE_AB, reason, a, c, gain, noise, won)
    if not gain > bar:
        what = "min_gain" if min_gain > noise else "noise"
        reason = f"gain {gain:+.4f} <= {what} {bar:.4f} over {len(a)} A/B pairs"
        return Decision(False, RULE_AB, reason, a, c, gain, noise, won)
    return Decision(True, RULE_AB, f"score {statistics.median(a):.4f} -> {statistics.median(c):.4f} "
                                   f"(gain {gain:+.4f} > {bar:.4f}, won {won}/{len(a)} pairs)", a, c, gain, noise, won)


def measure_ab(measure_incumbent: Callable[[int], EvalResult], measure_candidate: Callable[[int], EvalResult],
               score: Callable[[EvalResult], float | None], repeats: int
               ) -> tuple[list[float], list[float], list[tuple[str, EvalResult]]]:
    """Interleave A B A B ...; returns both sample lists and every result (role, result) in order.

    A re-measurement that fails or yields no score gives NaN, which the rule rejects."""
    a, c, results = [], [], []
    for k in range(repeats):
        for role, fn, samples in (("ab_incumbent", measure_incumbent, a), ("ab_candidate", measure_candidate, c)):
            r = fn(k)
            results.append((role, r))
            s = score(r) if r.accepted else None
            samples.append(float("nan") if s is None else float(s))
    return a, c, results


def correctness_only_decision(candidate_sha: str, incumbent_sha: str, accept_correct: bool = False) -> Decision:
    """No timing (interpreter): a correct candidate is recorded, not accepted unless `accept_correct`."""
    if candidate_sha == incumbent_sha:
        return Decision(False, RULE_INTERPRETER, "identical to the incumbent (no timing: scores not comparable)")
    if accept_correct:
        return Decision(True, RULE_INTERPRETER, "passed every gate; untimed (interpreter), accepted on correctness "
                                                "alone because acceptance.untimed=accept-correct")
    return Decision(False, RULE_INTERPRETER, "untimed under the interpreter, so nothing shows it beats the incumbent "
                                             "(run on a GPU to compare)")


REVIEW_SPEEDUP = 10.0   # a speedup this large over the incumbent on any shape is flagged for a person to review


def review_flags(incumbent: EvalResult | None, candidate: EvalResult, limit: float = REVIEW_SPEEDUP) -> list[str]:
    """Shapes on which the candidate beats the incumbent by more than `limit` times. Such a jump is more
    often a broken measurement or a cheat than a kernel; it is still re-measured by the A/B rule in fresh
    processes, and the record says so for review."""
    if incumbent is None:
        return []
    before = {r.id: r.t_us for r in incumbent.visible_shapes() if r.t_us}
    flags = []
    for r in candidate.visible_shapes():
        if r.t_us and before.get(r.id) and before[r.id] / r.t_us > limit:
            flags.append(f"shape {r.id}: {before[r.id] / r.t_us:.1f}x faster than the incumbent "
                         f"({before[r.id]:.2f} -> {r.t_us:.2f} us), above {limit:g}x: re-measured in fresh "
                         f"processes (A/B) and flagged for review")
    return flags


# ---------------------------------------------------------------- A/B in one worker (README: "The A/B statistic")

def round_scores(series, shapes, hardware, op: str, floor_us: float | None = None) -> tuple[list[float], list[float]]:
    """Per round, the run's score of A and of B (weight-averaged attainment over the series' shapes), from
    sandbox.ab.ABSeries per-round times. T_ref = max(T_roof, T_floor) as in every evaluation; T_floor is the
    run's (floor_us, agent/run_floor.py) when given, else the one the A/B's worker measured."""
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    from benchmarks.scoring import score_shape, weighted_attainment
    spec = load_operator(op)
    by_id = {s.id: s for s in shapes}
    floor = floor_us * 1e-6 if floor_us else float(series.floor_s or 0.0)
    refs = [(by_id[i], roofline(*spec.work(by_id[i]), hardware).t_roof_s) for i in series.shape_ids]
    out: list[list[float]] = [[], []]
    for r in range(series.rounds):
        for side, times in enumerate((series.a, series.b)):
            scores = [score_shape(s.id, s.weight, max(times[k][r], 1e-12), t_roof, floor)
                      for k, (s, t_roof) in enumerate(refs)]
            out[side].append(float(weighted_attainment(scores)))
    return out[0], out[1]


def sign_flip_p(d: Sequence[float], draws: int = SIGN_FLIP_DRAWS, seed: int = 0) -> float:
    """One-sided p-value of mean(d) > 0 under the null "d is symmetric about 0" (equal kernels measured in
    alternating order): the share of sign patterns whose mean is at least the observed one. Exact up to
    EXACT_MAX_ROUNDS values, else `draws` random patterns from a fixed seed, counted with the observed one
    ((1 + hits) / (1 + draws): never below the test's level)."""
    import numpy as np
    x = np.asarray(d, dtype=np.float64)
    n = len(x)
    if n == 0 or not np.all(np.isfinite(x)):
        return 1.0
    observed = x.mean() - 1e-15 * max(1.0, float(np.abs(x).max()))   # ties count against the candidate
    if n <= EXACT_MAX_ROUNDS:
        patterns = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        return float(np.mean((patterns * x).mean(axis=1) >= observed))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, draws, 4096):
        signs = rng.choice((-1.0, 1.0), size=(min(4096, draws - start), n))
        hits += int(np.sum((signs * x).mean(axis=1) >= observed))
    return (1 + hits) / (1 + draws)


def paired_decision(incumbent: Sequence[float], candidate: Sequence[float], alpha: float,
                    min_gain: float = 0.0) -> Decision:
    """The one-worker rule: d_r = ln(c_r / a_r) per round; accept iff the one-sided sign-flip p-value of
    mean(d) > 0 is below `alpha` and the median score gain exceeds `min_gain`. Equal kernels are accepted
    with probability at most alpha; the confirmation in a fresh process follows (confirm_decision)."""
    import numpy as np
    a, c = tuple(float(x) for x in incumbent), tuple(float(x) for x in candidate)
    if len(a) < 4 or len(a) != len(c):
        raise ValueError(f"the paired test needs >= 4 rounds of both kernels; got {len(a)} and {len(c)}")
    if not all(math.isfinite(x) and x > 0 for x in a + c):
        return Decision(False, RULE_AB_ONE_WORKER, "a round gave no positive finite score", a, c)
    d = np.log(np.asarray(c) / np.asarray(a))
    p = sign_flip_p(d)
    ratio = float(np.exp(d.mean()))
    gain = statistics.median(c) - statistics.median(a)
    won = int(np.sum(d > 0))
    details = {"p_value": p, "alpha": alpha, "rounds": len(a), "mean_ratio": ratio,
               "test": "one-sided sign-flip on ln(candidate/incumbent) per round"}
    if not p < alpha:
        return Decision(False, RULE_AB_ONE_WORKER, f"not shown faster: p={p:.3g} >= alpha {alpha:g} over {len(a)} "
                        f"interleaved rounds (mean ratio {ratio:.4f}, won {won}/{len(a)})", a, c, gain, None, won,
                        details)
    if not gain > min_gain:
        return Decision(False, RULE_AB_ONE_WORKER, f"gain {gain:+.4f} <= acceptance.min_gain {min_gain:g} "
                        f"(p={p:.3g})", a, c, gain, None, won, details)
    return Decision(True, RULE_AB_ONE_WORKER, f"score {statistics.median(a):.4f} -> {statistics.median(c):.4f} "
                    f"(ratio {ratio:.4f}, p={p:.3g} < {alpha:g}, won {won}/{len(a)} rounds)", a, c, gain, None, won,
                    details)


def confirm_decision(ab: Decision, fresh_score: float | None, margin: float) -> Decision:
    """The winner of an A/B, measured once more in a fresh process (timing only): it stays the winner iff
    that score exceeds the incumbent's A/B median less `margin` (relative; the cross-process spread of one
    kernel is 0.1-3% on the H200, so the margin is the screen's)."""
    if not ab.accept:
        return ab
    bar = statistics.median(ab.incumbent) * (1 - max(0.0, margin))
    details = {**ab.details, "confirm_score": fresh_score, "confirm_bar": bar}
    if fresh_score is None or not math.isfinite(fresh_score) or not fresh_score > bar:
        shown = "no score" if fresh_score is None else f"{fresh_score:.4f}"
        return Decision(False, RULE_CONFIRM, f"won the A/B ({ab.reason}) but a fresh process read {shown} <= "
                        f"{bar:.4f}: not confirmed", ab.incumbent, ab.candidate, ab.gain, None, ab.pairs_won, details)
    return Decision(True, ab.rule, f"{ab.reason}; confirmed in a fresh process ({fresh_score:.4f} > {bar:.4f})",
                    ab.incumbent, ab.candidate, ab.gain, None, ab.pairs_won, details)


def one_worker_decision(series, shapes, hardware, op: str, cfg, floor_us: float | None = None) -> Decision:
    """Decide on a sandbox.ab.ABSeries (A = incumbent, B = candidate) with acceptance config `cfg`, scored
    against the run's floor `floor_us` when given."""
    if series.error or len(series.shape_ids) != len(tuple(shapes)):
        return Decision(False, RULE_AB_ONE_WORKER, f"the A/B re-measure did not finish: {series.error or 'shapes missing'}",
                        details={"series": series.to_json()})
    a, c = round_scores(series, shapes, hardware, op, floor_us)
    d = paired_decision(a, c, cfg.alpha, cfg.min_gain)
    return dataclasses.replace(d, details={**d.details, "series": series.to_json()})
