"""One latency floor per run: the T_floor every score the loop compares is computed with.

Each sandbox evaluation measures the latency floor in its own worker process, and a decode shape's attainment
is that floor over the shape's time (T_ref = max(T_roof, T_floor)). The floor is a property of the machine, not
of the kernel, but its measurement moves from process to process: in session 36's search on an H100 (2026-12-07,
rms_norm_quant_fp8, 66 screens) it read 0.98-1.66 us. Compared as measured, a candidate faster on every shape
(2.64 / 2.74 / 4.96 us against 2.82 / 3.22 / 5.02) scored 0.639 against the incumbent's 0.683 because its process
read a floor of 1.05 us and the incumbent's 1.66, and the screen rejected it; the search's model learned the same
noise. So the run pins one floor and rescores every result it compares, scores or shows with it: the median of
the floors that the trusted evaluations of its first trusted iteration measured (`RunFloor`: the seed and the
baselines timed beside it, or in a --from-reference run the baselines timed beside the first kernel that passes
every gate). About one process in ten read near 1.0 us in those runs, so one measurement alone would put a whole
run's attainments a third low now and then; the median of the seed's and two baselines' needs two such outliers.
The evaluation records keep what each process measured; `pin_floor` changes only the loop's copy, and a resumed
run pins the same floor again from the same records. (The seed's own iteration record is written before its
baselines run, so its score there is on the seed's floor alone; the results the loop compares are rescored.)
It also keeps the floor out of a candidate's hands: the floor that scaled a candidate's score was measured in
the worker that had loaded the candidate.
"""
from __future__ import annotations

import statistics

from benchmarks.scoring import EmptyShapeSet, operator_score, score_shape, weighted_attainment
from sandbox.verdict import EvalResult


def trusted(role: str) -> bool:
    """Whether an evaluation of this role may set the run's floor: the seed (the user's kernel) and aka's own
    baselines, never a candidate, whose module is loaded in the worker that measures the floor. In a
    --from-reference run the baselines are timed beside the first kernel that passes every gate; until then
    each result keeps its own floor (there is no incumbent to compare with yet)."""
    return role == "seed" or role.startswith("baseline:")


class RunFloor:
    """The run's floor as its records arrive (agent/state.py folds them; agent/report_html/data.py reads them):
    `offer` each evaluation in trail order; `floor_us` is the median of the floors the trusted evaluations of
    the first trusted iteration that measured one recorded (None before any)."""

    def __init__(self) -> None:
        self.iteration: int | None = None
        self.floors: list[float] = []

    def offer(self, role: str, iteration: int, result: EvalResult | None) -> bool:
        """Take one evaluation; True when the run's floor changed (the stored results need pinning again)."""
        if not trusted(role) or (self.iteration is not None and iteration != self.iteration):
            return False
        floor = measured_floor_us(result)
        if floor is None:
            return False
        self.iteration = iteration
        before = self.floor_us
        self.floors.append(floor)
        return self.floor_us != before

    @property
    def floor_us(self) -> float | None:
        return float(statistics.median(self.floors)) if self.floors else None

    @classmethod
    def of(cls, evaluations) -> "RunFloor":
        """The floor of a whole trail: `evaluations` are (role, iteration, EvalResult) in trail order; results
        are asked for only where the role is trusted (a callable is called then, so a reader parses only those)."""
        rf = cls()
        for role, iteration, result in evaluations:
            if trusted(role):
                rf.offer(role, iteration, result() if callable(result) else result)
        return rf


def measured_floor_us(result: EvalResult | None) -> float | None:
    """The latency floor the evaluation measured (every timed row carries the same one), or None: not timed
    (the interpreter, a candidate rejected before timing)."""
    if result is None:
        return None
    for row in result.shapes:
        if not row.holdout and row.t_us is not None and row.t_floor_us:
            return float(row.t_floor_us)
    return None


def pin_floor(result: EvalResult | None, floor_us: float | None) -> EvalResult | None:
    """Rescore `result` in place with T_floor = floor_us: each timed row's floor and attainment, then S_i and
    the weighted attainment over the rows the sandbox scored (the visible ones; a failed one counts 0). A result
    without timings, or no floor to pin, is left as it is. Returns the result."""
    if result is None or not floor_us or floor_us <= 0:
        return result
    rows = [r for r in result.shapes if not r.holdout]
    timed = [r for r in rows if r.t_us is not None and r.t_roof_us is not None and r.attainment is not None]
    if not timed:
        return result
    for r in timed:
        sc = score_shape(r.id, r.weight, r.t_us * 1e-6, r.t_roof_us * 1e-6, floor_us * 1e-6)
        r.t_floor_us, r.attainment = float(floor_us), sc.attainment
    if result.weighted_attainment is not None or result.s_i is not None:
        scores = [score_shape(r.id, r.weight, None if r.error or r.t_us is None else r.t_us * 1e-6,
                              (r.t_roof_us or 0.0) * 1e-6, floor_us * 1e-6) for r in rows]
        try:
            result.s_i, result.weighted_attainment = operator_score(scores), weighted_attainment(scores)
        except EmptyShapeSet:
            pass
    return result
