"""The measure-revise loop.

    evaluate the seed -> [ feedback -> retrieve -> propose -> evaluate -> accept or reject -> record ]*

until a budget, the target, the proposer's end or a signal stops it. Every step lands in the audit
trail before the loop moves on; an accepted kernel is written to runs/RUN_ID/ (atomically) and
into the database before the next proposal, so a kill at any point loses no accepted kernel and
`--resume RUN_ID` continues from the records. Records are typed (agent/records.py) and the loop's
state is their fold (agent/state.py): every record written is applied with `state.step`, and a
resume folds the stored ones, so a resumed run has the state it had. A candidate that an earlier
session already evaluated is never evaluated again: an offline proposer hears the recorded outcome
(`observe`) and is asked again, which also replays its own search state.

Samples (`--samples N`): each step asks the proposer for N candidates at once (the LLM's N requests in
parallel, agent/proposers/base.py `propose_samples`; the search gives its N best-ranked moves), evaluates
every one that differs from the incumbent, from each other and from any candidate the run already
evaluated (by source hash), and takes only the best-scoring valid one to acceptance; each sample is its
own iteration record (so `--iterations` counts proposals and resume is unchanged), the others decided by
rule "sample". Token and dollar budgets count every sample.

From the reference (`--from-reference`): no seed. The run starts in a writing phase: the proposer
writes kernels from the contract and the PyTorch reference (agent/from_reference.py), each one
evaluated and its failure fed back as usual, until one passes every gate; that one becomes the first
incumbent (rule "from-reference", Accepted.from_reference) and the run optimizes it as any other. The
phase gives up after `reference_tries` proposals; a run that ends with no kernel at all exits 4. Its
proposals are iterations like any other (numbered from 0), so every budget counts them and a resume
continues the phase from the records. The summary's "before" is that first passing kernel.

Acceptance: agent/acceptance.py (interleaved A/B, noise-aware; a correctness-only stand-in when
there is no timing). Memory and optimization dropout: agent/memory.py. Budgets: agent/budget.py.
"""
from __future__ import annotations

import dataclasses
import math
import signal
import statistics
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from agent.acceptance import (RULE_GATE, RULE_INCUMBENT_FAILED, RULE_TIMED_SCREEN, RULE_WINNER_HOLDOUTS, Decision,
                              ab_decision, confirm_decision, correctness_only_decision, measure_ab,
                              median_attainment, one_worker_decision, review_flags, run_score, screen_decision)
from agent import records as R
from agent.audit import Audit, atomic_write, sha256_text
from agent.budget import BudgetLimits, BudgetUsed, exhausted, gpu_forecast_stop
from agent.holdout import redact_holdout
from agent.memory import lesson, visible_per_shape
from agent.run_floor import pin_floor
from agent.no_op import no_op_decision
from agent.proposers.base import propose_samples
from agent.state import RunState, restore, step
from agent.progress import Progress, Status, summary_rows, summary_table
from agent.types import IterationRecord, OperatorContract, Proposal, ProposalContext, Snippet
from sandbox.verdict import EvalResult

RULE_SAMPLE = "sample"      # passed every gate but another sample of the same round scored higher
RULE_FROM_REFERENCE = "from-reference"   # the first kernel written from the reference that passes every gate
DEFAULT_REFERENCE_TRIES = 10
EXIT_NO_KERNEL = 4          # a --from-reference run ended before any kernel passed every gate
Evaluator = Callable[[Any], EvalResult]          # sandbox.EvalRequest -> EvalResult
Scorer = Callable[[EvalResult], "float | None"]
FeedbackBuilder = Callable[[OperatorContract, "EvalResult | None", list], str]


REPLAY_LIMIT = 256   # re-asks of a free proposer per iteration while it repeats earlier sessions' candidates
# Proposals in a row whose proposer raised (a bug, a broken environment, an outage its retries did not outlast)
# before the run stops as on a fatal proposer error (exit 3): such a failure costs no GPU time, so without a
# limit a run with a GPU-minutes budget records empty iterations until it is killed (an H100 run, its search's
# compile pool killed, recorded 446 in 15 s).
PROPOSER_RAISE_LIMIT = 20


class Retriever(Protocol):
    def snippets(self, contract: OperatorContract, result: EvalResult | None, feedback: str) -> tuple[Snippet, ...]: ...

    def remember(self, op: str, source: str, sha256: str, meta: dict) -> None:
        """An accepted kernel joins the knowledge base's reference layer (the base grows as aka works)."""


class NoRetrieval:
    """Retrieval off (the default in tests, and when the knowledge base is unavailable)."""

    def snippets(self, contract, result, feedback) -> tuple[Snippet, ...]:
        return ()

    def remember(self, op, source, sha256, meta) -> None:
        pass


@dataclass(frozen=True)
class RunPlan:
    """What a run is; recorded in its run_start record and read back on --resume."""

    op: str
    shape_set: str
    shapes: tuple                       # benchmarks.spec.Shape, the run's (visible) shapes
    hardware: Any                       # benchmarks.hardware.Hardware the scores use
    seed_source: str
    seed_path: str = ""
    target: float = 0.95
    limits: BudgetLimits = BudgetLimits()
    proposer: str = "search"
    model: str | None = None
    rng_seed: int = 0
    dropout: bool = True
    baselines: tuple[str, ...] = ("eager", "compile")   # timed once on a GPU for the export's table
    script: tuple[str, ...] = ()                        # the scripted proposer's files, for --resume
    from_reference: bool = False                        # no seed: the proposer writes the first kernel
    reference_tries: int = DEFAULT_REFERENCE_TRIES      # proposals the writing phase may take

    def record(self, **extra) -> R.RunStart:
        hw = self.hardware
        return R.RunStart(
            op=self.op, shape_set=self.shape_set, target=self.target, proposer=self.proposer, model=self.model,
            rng_seed=self.rng_seed, dropout=self.dropout, seed_path=self.seed_path, baselines=tuple(self.baselines),
            script=tuple(self.script), limits=self.limits, from_reference=self.from_reference,
            reference_tries=self.reference_tries if self.from_reference else 0,
            hardware=dataclasses.asdict(hw) if dataclasses.is_dataclass(hw) else str(hw),
            # dims as [name, value] pairs: canonical JSON sorts object keys, lists keep the order
            shapes=tuple({"id": s.id, "dims": [list(d) for d in s.dims], "dtype": s.dtype, "phase": s.phase,
                          "source": s.source, "weight": s.weight, "hot": s.hot} for s in self.shapes), **extra)

    def to_json(self) -> dict:
        return self.record().to_json()

    @staticmethod
    def from_record(d: R.RunStart, hardware: Any, seed_source: str) -> "RunPlan":
        """The plan of a recorded run (for --resume); `hardware` is resolved again by the caller."""
        from benchmarks.spec import Shape
        shapes = tuple(Shape.make(**{**s, "dims": dict(s["dims"])}) for s in d.shapes)
        return RunPlan(op=d.op, shape_set=d.shape_set, shapes=shapes, hardware=hardware, seed_source=seed_source,
                       seed_path=d.seed_path, target=d.target, limits=d.limits, proposer=d.proposer, model=d.model,
                       rng_seed=d.rng_seed, dropout=d.dropout, baselines=d.baselines, script=d.script,
                       from_reference=d.from_reference, reference_tries=d.reference_tries or DEFAULT_REFERENCE_TRIES)

    @staticmethod
    def from_json(d: dict, hardware: Any, seed_source: str) -> "RunPlan":
        return RunPlan.from_record(R.RunStart.from_json(d), hardware, seed_source)


@dataclass(frozen=True)
class Outcome:
    run_id: str
    reason: str
    iterations: int
    incumbent_sha256: str
    incumbent_path: str
    score: float | None
    s_i: float | None
    rows: list
    interpreter: bool
    exit_code: int = 0                 # 0 done, 3 fatal proposer error, 4 no kernel (--from-reference), 128+N signal N


class Loop:
    def __init__(self, plan: RunPlan, cfg, proposer, audit: Audit, contract: OperatorContract, run_id: str, *,
                 evaluate: Evaluator, score: Scorer = run_score, feedback: FeedbackBuilder | None = None,
                 retriever: Retriever | None = None, progress: Progress | None = None, samples: int = 1):
        if samples < 1:
            raise ValueError(f"samples={samples}: a step needs at least 1 candidate (1 is the default)")
        if plan.from_reference and not getattr(proposer, "writes_from_reference", False):
            from agent.from_reference import needs_a_model
            raise ValueError(needs_a_model(proposer.name))
        self.plan, self.cfg, self.proposer, self.audit, self.contract = plan, cfg, proposer, audit, contract
        self.samples = samples
        self.run_id, self.evaluate, self.score = run_id, evaluate, score
        self.feedback = feedback or _default_feedback
        self.retriever = retriever or NoRetrieval()
        self.progress = progress or Progress()
        if hasattr(proposer, "on_drop"):      # the search's compile check: each drop as it happens
            proposer.on_drop = lambda changed, why: self.progress.message(
                f"{proposer.name}: dropped before the GPU: {changed}: {why[:200]}")
        self.run_dir = cfg.home_dir / "runs" / run_id
        self.st = RunState(op=plan.op)
        self.stop_signal: int | None = None
        self.fatal_error: str | None = None
        self._raised_in_a_row = 0               # proposals in a row whose proposer raised (PROPOSER_RAISE_LIMIT)
        self.replayable: set[str] = set()    # candidates an earlier session evaluated (see _propose_new)
        self.replayed = 0
        self.final_proposal = False
        self.last_lesson = ""
        self.gave_up = False
        self._timed_for: str | None = None         # the incumbent whose timing-only scores _bar holds
        self._bar: list[float] = []                # (the screens' bar is their median)
        self._bar_failed = False                   # its first timing failed: no screens for this incumbent
        self._screens_since_bar = 0
        self._confirmed: dict[str, float] = {}     # sha -> score of its fresh-process confirmation (timing only)
        self._round_gpu: list[float] = []           # GPU seconds of each round of this session (the forecast)

    @property
    def writing(self) -> bool:
        """In the writing phase of a --from-reference run: no kernel has passed every gate yet."""
        return self.plan.from_reference and not self.st.incumbent_sha

    # ---- the loop ------------------------------------------------------------------------
    def run(self, resume: bool = False) -> Outcome:
        with self._signals(), self.progress:
            try:
                self._resume() if resume else self._start()
                while (reason := self._stop_reason()) is None:
                    self.step()
            except KeyboardInterrupt:
                self._end("interrupted (second Ctrl-C) during an iteration; it was not recorded")
                raise
            return self._end(reason)

    def step(self) -> None:
        """One round: propose `samples` candidates, evaluate those that differ, accept at most the best."""
        st = self.st
        first, gpu_before = st.iteration, st.used.gpu_s
        try:
            self._step(st, first)
        finally:
            self._round_gpu.append(st.used.gpu_s - gpu_before)

    def _step(self, st: RunState, first: int) -> None:
        ctx = self._context(first)
        self._show(first, "proposing")
        proposals = self._propose_round(ctx, self._round_size())
        self.final_proposal = any(p.meta.get("final") for p in proposals)
        for p in proposals:
            if p.meta.get("fatal"):   # the provider refused for good (key, model): exit code 3
                self.fatal_error = self.fatal_error or p.error or "fatal proposer error"
        self._count_raises(proposals)
        # what each sample is: a duplicate note, or a result to compare
        shas, notes, results = [], [], []
        for proposal in proposals:
            sha = self.audit.put_source(proposal.source) if proposal.source is not None else ""
            earlier = st.seen.get(sha) if sha and sha != st.incumbent_sha else None
            note = None
            if sha and sha == st.incumbent_sha:
                note = "duplicate of the incumbent; not re-evaluated"
            elif earlier is not None:
                note = f"duplicate of iteration #{earlier.iteration} ({earlier.lesson}); not re-evaluated"
            elif sha and sha in shas:
                note = (f"duplicate of iteration #{first + shas.index(sha)} (an earlier sample of this round); "
                        f"not re-evaluated")
            shas.append(sha)
            notes.append(note)
            results.append(None)
        todo = [k for k, p in enumerate(proposals) if p.source is not None and notes[k] is None]
        if todo and not st.interpreter and hasattr(self.proposer, "prefetch"):
            self._prefetch(2)
        screened: dict[int, Decision] = {}
        for n, k in enumerate(todo):
            self._show(first + k, "evaluating" + (f" sample {n + 1}/{len(todo)}" if len(todo) > 1 else ""))
            if self._timing_first():
                light = self._timed_screen(proposals[k].source, shas[k], first + k)
                if light is not None:
                    results[k], screened[k] = light
                    continue
            results[k], _ = self._evaluate(proposals[k].source, shas[k], "candidate", first + k, full=True)
            for flag in review_flags(st.incumbent_result, results[k]):
                results[k].flags.append(flag)
                self.progress.message(f"review: {flag}")
        best = self._best_sample(results, [k for k in todo if k not in screened])
        for k, proposal in enumerate(proposals):
            self._conclude(first + k, k, proposal, shas[k], notes[k], results, best, len(todo), screened.get(k))

    # ---- timing first: the cheap measurement before the expensive gates ------------------------------
    def _timing_first(self) -> bool:
        """acceptance.timing_first: "auto" for a proposer that asks for it (the offline search, whose
        candidates are mostly slower moves) on a GPU; "always"; "never"."""
        mode = self.cfg.acceptance.timing_first
        if mode == "never" or self.writing or self.st.incumbent_result is None:
            return False
        if mode == "always":
            return True
        return bool(getattr(self.proposer, "timing_first", False)) and not self.st.interpreter

    def _timed_screen(self, source: str, sha: str, it: int) -> tuple[EvalResult, Decision] | None:
        """Time the candidate alone (its attribution gate included, no correctness trials) and compare it
        with the incumbent timed the same way. A candidate clearly slower is rejected here, before the
        correctness and hold-out trials that cost most of a full evaluation; a candidate that fails a gate
        of this evaluation is rejected at that gate. None: it goes on to the full evaluation, every gate, and
        only then to acceptance, so nothing is accepted that the full rule would reject."""
        bar = self._incumbent_timed(it)
        if bar is None:
            return None
        self._screens_since_bar += 1
        light, _ = self._evaluate(source, sha, "screen", it, full=False)
        if not light.accepted:
            return light, Decision(False, RULE_GATE, f"rejected at {light.failed_stage or 'sandbox'} (timed first)")
        first = self.score(light)
        if first is None:
            return None
        decision = screen_decision(first, bar, self.cfg.acceptance.screen_margin)
        if decision is None:
            return None
        why = (f"timed first: {decision.reason}; the correctness trials were not run (a slower kernel cannot be "
               f"accepted)")
        return light, Decision(False, RULE_TIMED_SCREEN, why, candidate=decision.candidate)

    def _incumbent_timed(self, it: int) -> float | None:
        """The screens' bar: the median of the incumbent's scores from timing-only evaluations like the
        candidates' (like against like). An accepted winner's fresh-process confirmation is its first; the
        incumbent is timed alone again after every `acceptance.screen_bar_every` screens, so one lucky or
        unlucky process does not set the bar for the incumbent's whole life. None: its timing failed."""
        st = self.st
        if self._timed_for != st.incumbent_sha:
            self._timed_for, self._bar, self._bar_failed = st.incumbent_sha, [], False
            self._screens_since_bar = 0
            if st.incumbent_sha in self._confirmed:   # its confirmation was such an evaluation
                self._bar.append(self._confirmed[st.incumbent_sha])
        every = self.cfg.acceptance.screen_bar_every
        if not self._bar_failed and (not self._bar or (every > 0 and self._screens_since_bar >= every)):
            res, _ = self._evaluate(st.incumbent_source, st.incumbent_sha, "screen_incumbent", it, full=False)
            score = self.score(res) if res.accepted else None
            if score is None:
                self._bar_failed = not self._bar      # no bar at all: candidates get their full evaluation
            else:
                self._bar.append(score)
            self._screens_since_bar = 0
        return statistics.median(self._bar) if self._bar else None

    def _count_raises(self, proposals: list[Proposal]) -> None:
        """Stop the run (a fatal proposer error) after PROPOSER_RAISE_LIMIT proposals in a row that raised."""
        for p in proposals:
            self._raised_in_a_row = self._raised_in_a_row + 1 if p.meta.get("raised") else 0
        if self._raised_in_a_row >= PROPOSER_RAISE_LIMIT and self.fatal_error is None:
            # the count is only nonzero when the batch's last proposal raised
            self.fatal_error = (f"the {self.proposer.name} proposer raised on the last {self._raised_in_a_row} "
                                f"proposals (limit {PROPOSER_RAISE_LIMIT}), the last: {proposals[-1].error}; "
                                f"every one is in the audit trail (aka audit show {self.run_id}); fix its cause "
                                f"and continue with aka optimize --resume {self.run_id}")

    def _prefetch(self, n: int) -> None:
        """Compile the next n candidates on CPU cores while the GPU times these. An aid: when it fails (a SIGTERM
        sent to the whole process group kills the compile workers, and the pool raises BrokenProcessPool) the
        iteration goes on, so it is still recorded and a stop still ends the run with its record and exit code."""
        try:
            self.proposer.prefetch(n)
        except Exception as e:
            self.progress.message(f"proposer.prefetch raised {type(e).__name__}: {e}; the next candidates are "
                                  f"checked when they are proposed")

    def _round_size(self) -> int:
        """`samples`, but never past the iteration budget (each sample is an iteration)."""
        limit = self.plan.limits.iterations
        left = self.samples if limit is None else limit - self.st.used.iterations
        return max(1, min(self.samples, left))

    def _propose_round(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """n proposals: a proposer with propose_many answers them at once (the LLM's parallel requests);
        any other is asked n times, each ask replaying an earlier session's move as _propose_new does."""
        if n > 1 and callable(getattr(self.proposer, "propose_many", None)):
            try:
                out = propose_samples(self.proposer, ctx, n)
            except Exception as e:   # an LLM outage or a proposer bug is recorded; the loop goes on
                out = [Proposal(source=None, error=f"proposer {self.proposer.name} raised {type(e).__name__}: {e}",
                                meta={"raised": True})]
            for proposal in out:     # every sample's tokens and dollars count (as _propose counts one)
                self.st.used = self.st.used.plus(tokens=proposal.usage.tokens, usd=proposal.usage.usd)
            return out
        out: list[Proposal] = []
        for _ in range(n):
            out.append(self._propose_new(ctx))
            if out[-1].meta.get("final") or out[-1].meta.get("fatal"):
                break
        return out

    def _best_sample(self, results: list, todo: list[int]) -> int | None:
        """The sample that goes to acceptance: the best score among those that passed every gate (the
        first passing one when nothing is timed)."""
        passed = [k for k in todo if results[k].accepted]
        if not passed:
            return None
        scored = [(self.score(results[k]), -k) for k in passed]
        timed = [x for x in scored if x[0] is not None]
        return -max(timed)[1] if timed else passed[0]

    def _conclude(self, it: int, k: int, proposal: Proposal, sha: str, note: str | None, results: list,
                  best: int | None, evaluated: int, screened: Decision | None = None) -> None:
        result = results[k]
        if proposal.source is None:
            why = lesson(None, accepted=False, error=proposal.error or "the proposer returned no source")
            rec = IterationRecord(it, "", proposal.changed or "(no candidate)", proposal.why, "error", "proposer",
                                  None, {}, why)
            return self._commit(rec, proposal, EvalResult(op=self.plan.op, reasons=[why]),
                                Decision(False, "proposer", why), evaluated=False)
        if note is not None:
            rec = IterationRecord(it, sha, proposal.changed, proposal.why, "rejected", "duplicate", None, {}, note)
            return self._commit(rec, proposal, EvalResult(op=self.plan.op, reasons=[note]),
                                Decision(False, "duplicate", note), sha, evaluated=False)
        if screened is not None:
            decision = screened
        elif k == best or not result.accepted:
            decision = self._decide(result, proposal.source, sha, it)
        else:
            decision = Decision(False, RULE_SAMPLE, f"sample #{it - k + best} of this round scored higher "
                                f"({_fmt(self.score(results[best]))} vs {_fmt(self.score(result))}); only the "
                                f"best of {evaluated} goes to acceptance")
        # The record's score is the candidate's own evaluation, on the scale of the seed's: an A/B re-measure
        # times one graph replay per round, whose scores read lower in absolute terms (0.46 for a kernel
        # whose full evaluation read 0.56 on the H200); its numbers stay in the decision, where they are
        # compared only with each other.
        measured = [x for x in decision.candidate if math.isfinite(x)]
        score = self.score(result)
        if score is None and measured:
            score = statistics.median(measured)
        verdict, stage = ("accepted", None) if decision.accept else (
            ("rejected", "acceptance") if result.accepted else ("rejected", result.failed_stage or "sandbox"))
        rec = IterationRecord(it, sha, proposal.changed, proposal.why, verdict, stage, score,
                              visible_per_shape(result), lesson(result, accepted=decision.accept,
                                                                decision=decision.reason),
                              accepted=decision.accept)
        first_kernel = decision.accept and self.writing
        self._commit(rec, proposal, result, decision, sha, source=proposal.source)
        if first_kernel:
            self.progress.message(f"#{it}: the first kernel written from the reference passed every gate; "
                                  f"it is the incumbent now")
            self._time_baselines(it)
        if decision.accept:   # the state's incumbent is this kernel now (agent.state.step of the Accepted record)
            try:
                self.retriever.remember(self.plan.op, proposal.source, sha, {"run": self.run_id, "iteration": it,
                                                                             "score": score})
            except Exception as e:   # the knowledge base is an aid; the kernel is already safe on disk
                self.progress.message(f"could not add the accepted kernel to the knowledge base ({e}); continuing")

    # ---- parts ---------------------------------------------------------------------------
    def _context(self, it: int) -> ProposalContext:
        st, d = self.st, self.cfg.dropout
        # no dropout while writing from the reference: every earlier failure is what the next try must avoid
        fresh = self.plan.dropout and d.enabled and st.stall >= d.patience and not self.writing
        if fresh:
            ev = st.memory.dropout(it, d.p, (self.plan.rng_seed * 1_000_003 + it) % 2**32)
            self._record(R.Dropout(ev.iteration, ev.masked, ev.protected, ev.eligible, ev.rng_seed, ev.p,
                                   d.patience, st.stall))
        basis = st.incumbent_result if fresh or st.last_result is None else st.last_result
        # Hidden rows stay (feedback reports them as counts); text that names their dims does not.
        shown = redact_holdout(basis, keep_hidden_rows=True) if basis is not None else None
        diagnoses = [str(x) for x in (shown.counters.get("diagnoses") or [])] if shown is not None else []
        text = self.feedback(self.contract, shown, diagnoses) if shown is not None else ""   # the first try
        if fresh:
            text = f"{text}\n\n{st.memory.summary()}"
        try:
            snippets = tuple(self.retriever.snippets(self.contract, shown, text))
        except Exception as e:   # retrieval is an aid, never a reason to stop the run
            self.progress.message(f"retrieval failed ({type(e).__name__}: {e}); continuing without snippets")
            snippets = ()
        inc = redact_holdout(st.incumbent_result).to_json() if st.incumbent_result is not None else None
        return ProposalContext(self.contract, st.incumbent_source, st.incumbent_score, text, inc, snippets,
                               st.memory.visible(), it, self.plan.rng_seed + it)

    def _propose(self, ctx: ProposalContext) -> Proposal:
        try:
            proposal = self.proposer.propose(ctx)
        except Exception as e:   # an LLM outage or a proposer bug is recorded; the loop goes on
            proposal = Proposal(source=None, error=f"proposer {self.proposer.name} raised {type(e).__name__}: {e}",
                                meta={"raised": True})
        self.st.used = self.st.used.plus(tokens=proposal.usage.tokens, usd=proposal.usage.usd)
        return proposal

    def _propose_new(self, ctx: ProposalContext) -> Proposal:
        """A proposal, never one an earlier session of this run already evaluated. A free (offline)
        proposer that repeats one hears its recorded outcome and is asked again: that replays its
        search state (the search proposer is seeded, so it repeats its moves in order after a
        resume). A paid proposer's repeat is recorded as a duplicate (asking again costs money)."""
        st = self.st
        for _ in range(REPLAY_LIMIT):
            proposal = self._propose(ctx)
            if proposal.source is None or proposal.usage.calls:
                return proposal
            sha = sha256_text(proposal.source)
            earlier = st.seen.get(sha)
            if earlier is None or sha not in self.replayable:
                return proposal
            self.replayable.discard(sha)      # replayed once; a second repeat is a real duplicate
            self.replayed += 1
            try:
                self.proposer.observe(proposal, st.results.get(sha), earlier.accepted)
            except Exception as e:
                self.progress.message(f"proposer.observe raised {type(e).__name__}: {e}; ignored")
        return proposal

    def _record(self, *recs) -> list:
        """Append typed records in one transaction, then apply them to the state (the same fold a
        resume replays)."""
        out = R.append(self.audit, self.run_id, *recs)
        for rec in recs:
            step(self.st, rec, self.audit.source)
        return out

    def _request(self, source: str, full: bool, baseline: str | None = None, private: bool = False,
                 winner_check: bool = False):
        """A candidate's compile cache starts from the incumbent's sealed one (the specializations it did not
        change are not compiled again); a winner's fresh confirmation (`private`) compiles from its own source.
        Hold-outs come from the scored shapes' models, except in a winner's check (`winner_check`: correctness
        only, hold-outs at every published shape) or with acceptance.winner_holdouts off."""
        from sandbox import EvalRequest
        inc = self.st.incumbent_source
        seed_from = inc if inc and not baseline and not private and source != inc else None
        pool = "visible" if self.cfg.acceptance.winner_holdouts and not winner_check else "all"
        return EvalRequest(op=self.plan.op, source=source, shapes=tuple(self.plan.shapes), hardware=self.plan.hardware,
                           settings=self.cfg.sandbox, timing=not winner_check, correctness=full or winner_check,
                           baseline=baseline, compile_cache_from=seed_from, private_compile=private,
                           holdout_pool=pool)

    def _evaluate(self, source: str, sha: str, role: str, it: int, full: bool, repeat: int = 0,
                  baseline: str | None = None, private: bool = False,
                  winner_check: bool = False) -> tuple[EvalResult, int]:
        t0 = time.monotonic()
        try:   # no seed: the sandbox draws fresh inputs and hidden shapes every time, and records neither
            result = self.evaluate(self._request(source, full, baseline, private, winner_check))
        except Exception as e:   # a harness bug: recorded as a failed evaluation, the loop goes on
            result = EvalResult(op=self.plan.op, reasons=[f"sandbox raised {type(e).__name__}: {e}"],
                                flags=["harness error"], interpreter=self.st.interpreter)
        wall = time.monotonic() - t0
        gpu = 0.0 if result.interpreter else wall
        rec = self._record(R.Evaluation(iteration=it, role=role, repeat=repeat, source_sha256=sha or None,
                                        baseline=baseline, result=result.to_json(), gpu_s=gpu, wall_s=wall,
                                        session=self.st.session))[0]
        # the record keeps what this process measured; the loop compares every score against one floor
        pin_floor(result, self.st.run_floor_us)
        if role in ("seed", "candidate") and sha:
            self.st.results[sha] = result     # the object itself (flags may still be added to it)
        return result, rec.seq

    def _decide(self, result: EvalResult, source: str, sha: str, it: int) -> Decision:
        decision = self._decide_gain(result, source, sha, it)
        if decision.accept and self.cfg.acceptance.winner_holdouts and self.cfg.sandbox.holdout:
            decision = self._winner_holdouts(decision, source, sha, it)
        return decision

    def _winner_holdouts(self, decision: Decision, source: str, sha: str, it: int) -> Decision:
        """The winner's correctness once more, with hold-outs drawn at every published shape of the operator
        (its candidate evaluation drew them at the scored shapes' models only): accepted only if it passes."""
        self._show(it, "hold-outs at every published shape")
        check, _ = self._evaluate(source, sha, "winner_holdouts", it, full=True, winner_check=True)
        if check.accepted:
            return dataclasses.replace(decision, reason=f"{decision.reason}; passed hold-outs at every published "
                                                        f"shape of {self.plan.op}")
        why = check.reasons[0] if check.reasons else f"rejected at {check.failed_stage or 'sandbox'}"
        return Decision(False, RULE_WINNER_HOLDOUTS, f"{decision.reason}, but the check at every published shape "
                        f"failed: {why}", decision.incumbent, decision.candidate, decision.gain, decision.noise,
                        decision.pairs_won, decision.details)

    def _decide_gain(self, result: EvalResult, source: str, sha: str, it: int) -> Decision:
        """Whether a candidate that passed its gates replaces the incumbent: the screen, the A/B and the
        fresh-process confirmation (or the rules without timing)."""
        st = self.st
        if not result.accepted:
            return Decision(False, RULE_GATE, f"rejected at {result.failed_stage or 'sandbox'}")
        if self.writing:
            return Decision(True, RULE_FROM_REFERENCE, "the first kernel written from the reference that passes "
                                                       "every gate becomes the incumbent (there is no seed to beat)")
        if st.incumbent_result is None or not st.incumbent_result.accepted:
            return Decision(True, RULE_INCUMBENT_FAILED, "the incumbent fails its own gates; a correct candidate "
                                                         "replaces it")
        no_op = no_op_decision(st.incumbent_result, result)
        if no_op is not None:       # before any A/B, on the interpreter too: the same work is not a change
            return no_op
        if self.score(result) is None or st.incumbent_score is None:
            return correctness_only_decision(sha, st.incumbent_sha,
                                             accept_correct=self.cfg.acceptance.untimed == "accept-correct")
        if self.stop_signal is not None:
            return Decision(False, "interrupted", "stop requested before the A/B re-measurement; kept the incumbent")
        if self.cfg.acceptance.screen:
            # like against like: the incumbent's own full evaluation, not its A/B median (on the H200 a full
            # evaluation reads ~2% below the light A/B re-measurements of the same kernel)
            incumbent_first = self.score(st.incumbent_result)
            screened = screen_decision(self.score(result), st.incumbent_score if incumbent_first is None
                                       else incumbent_first, self.cfg.acceptance.screen_margin)
            if screened is not None:
                return screened
        inc_source, inc_sha = st.incumbent_source, st.incumbent_sha
        if hasattr(self.evaluate, "measure_ab"):   # the sandbox: both kernels in one worker, then a fresh confirm
            self._show(it, f"A/B x{self.cfg.sandbox.ab_rounds} rounds in one worker")
            series = self.evaluate.measure_ab(self._request(inc_source, False), source)
            self.st.used = self.st.used.plus(gpu_s=series.wall_s)
            decision = one_worker_decision(series, self.plan.shapes, self.plan.hardware, self.plan.op,
                                           self.cfg.acceptance, floor_us=self.st.run_floor_us)
            if decision.accept:
                fresh, _ = self._evaluate(source, sha, "ab_confirm", it, False, 1, private=True)
                confirmed = self.score(fresh) if fresh.accepted else None
                decision = confirm_decision(decision, confirmed, self.cfg.acceptance.screen_margin)
                if decision.accept and confirmed is not None:
                    # a timing-only evaluation in a fresh process, as the screens' bar is: if the winner becomes
                    # the incumbent, its screens compare with this score (each re-timing took 2-3 s of fused_moe)
                    self._confirmed[sha] = confirmed
            return decision
        repeats = max(1, self.cfg.acceptance.repeats)
        self._show(it, f"A/B x{repeats}")
        a, c, _ = measure_ab(lambda k: self._evaluate(inc_source, inc_sha, "ab_incumbent", it, False, k + 1)[0],
                             lambda k: self._evaluate(source, sha, "ab_candidate", it, False, k + 1)[0],
                             self.score, repeats)
        return ab_decision(a, c, self.cfg.acceptance.min_gain)

    def _commit(self, rec: IterationRecord, proposal: Proposal, result: EvalResult, decision: Decision,
                sha: str = "", source: str | None = None, evaluated: bool = True) -> None:
        """Record the iteration; for an accepted kernel, first write it to disk, then both records in one
        transaction -- the DB never names an accepted kernel that is not on disk."""
        st = self.st
        st.used = self._tick().plus(iterations=1)
        items: list = []
        if decision.accept:
            path = self._write_kernel(rec.iteration, sha, source)
            items.append(R.Accepted(rec.iteration, sha, str(path), rec.score, seed=False,
                                    from_reference=self.writing))
        items.append(R.Iteration(record=rec, source_sha256=sha or None, usage=proposal.usage,
                                 proposal=R.ProposalInfo(proposal.changed, proposal.why, proposal.error,
                                                         dict(proposal.meta)),
                                 decision=decision.to_json(), flags=tuple(result.flags), used=st.used,
                                 session=st.session))
        self._record(*items)
        if evaluated:
            st.last_result = result   # the live object: review flags added after its record are kept
        try:
            self.proposer.observe(proposal, result if evaluated else None, decision.accept)
        except Exception as e:
            self.progress.message(f"proposer.observe raised {type(e).__name__}: {e}; ignored")
        self.last_lesson = f"#{rec.iteration} {rec.lesson}"
        changed = rec.changed if len(rec.changed) <= 60 else rec.changed[:57] + "..."
        self.progress.update(Status(self.run_id, self.plan.op, rec.iteration, st.best, changed, rec.lesson,
                                    st.used.line(self.plan.limits)), final=True)

    def _write_kernel(self, iteration: int, sha: str, source: str) -> Any:
        path = self.run_dir / "accepted" / f"{iteration:04d}-{sha[:12]}.py"
        atomic_write(path, source)
        atomic_write(self.run_dir / "best.py", source)
        return path

    # ---- start, resume, stop -------------------------------------------------------------
    def _start(self) -> None:
        from benchmarks.registry import OPERATORS_DIR
        # blobs first: a record never names a missing one
        sha = self.audit.put_source(self.plan.seed_source) if not self.plan.from_reference else ""
        # The operator file as it was: the export's test checks the kernel against this very reference.
        op_sha = self.audit.put_source((OPERATORS_DIR / self.plan.op / "operator.py").read_text())
        self._record(self.plan.record(config=_config_json(self.cfg), seed_source_sha256=sha, operator_sha256=op_sha))
        if self.plan.from_reference:
            self.progress.message(f"no seed: the {self.proposer.name} proposer writes the first kernel from the "
                                  f"reference ({self.plan.reference_tries} tries at most)")
        else:
            self._evaluate_seed()

    def _evaluate_seed(self) -> None:
        st, sha = self.st, self.audit.put_source(self.plan.seed_source)
        self._show(0, "evaluating the seed")
        result, _ = self._evaluate(self.plan.seed_source, sha, "seed", 0, full=True)
        st.interpreter = result.interpreter
        score = self.score(result)
        rec = IterationRecord(0, sha, "seed kernel", self.plan.seed_path, "accepted" if result.accepted else "rejected",
                              result.failed_stage, score, visible_per_shape(result),
                              lesson(result, accepted=result.accepted, decision="the seed"), is_seed=True,
                              accepted=result.accepted)
        path = self._write_kernel(0, sha, self.plan.seed_source)
        self._record(R.Accepted(0, sha, str(path), score, seed=True, passed=result.accepted),
                     R.Iteration(record=rec, source_sha256=sha, used=st.used, session=st.session))
        st.incumbent_result, st.seed_result = result, result
        self._time_baselines(0)

    def _time_baselines(self, it: int) -> None:
        """The PyTorch baselines of the export's table, timed once per run beside the first incumbent."""
        if self.st.interpreter:
            return
        for b in self.plan.baselines:
            self._show(it, f"timing baseline {b}")
            self._evaluate("", "", f"baseline:{b}", it, full=False, baseline=b)

    def _resume(self) -> None:
        import os
        import socket
        self.st = restore(self.audit, self.run_id)
        self.replayable = set(self.st.seen)
        self._record(R.Resume(self.st.session + 1, self.st.iteration, self.st.used, self.plan.limits,
                              os.getpid(), socket.gethostname()))
        if hasattr(self.proposer, "replay"):   # a proposer that can take its history in one go
            self.proposer.replay(tuple(self.st.history))
        self.progress.message(f"resuming {self.run_id} at iteration {self.st.iteration} "
                              f"({self.st.used.line(self.plan.limits)})")
        if not self.st.incumbent_sha and not self.plan.from_reference:   # killed before the seed's verdict
            self._evaluate_seed()

    def _tick(self) -> BudgetUsed:
        now = time.monotonic()
        self.st.used = self.st.used.plus(wall_s=now - self.st.clock)
        self.st.clock = now
        return self.st.used

    def _stop_reason(self) -> str | None:
        if self.stop_signal is not None:
            return f"stopped by {signal.Signals(self.stop_signal).name} after recording iteration {self.st.iteration - 1}"
        if self.fatal_error is not None:
            return f"fatal proposer error: {self.fatal_error}"
        if self.writing and self.st.used.iterations >= self.plan.reference_tries:
            self.gave_up = True
            return (f"gave up: none of the {self.st.used.iterations} kernels written from the reference passed "
                    f"every gate (--reference-tries {self.plan.reference_tries}); each one's reason is in the audit "
                    f"trail (aka audit show {self.run_id}). Resume with a larger --reference-tries, try another "
                    f"--model, or start from a kernel with --seed-kernel")
        s_i = median_attainment(self.st.incumbent_result)
        if s_i is not None and s_i >= self.plan.target:
            return f"target reached: S_i {s_i:.3f} >= {self.plan.target:g}"
        if self.final_proposal:
            return f"the {self.proposer.name} proposer has nothing more to propose"
        used = self._tick()
        return exhausted(self.plan.limits, used) or gpu_forecast_stop(self.plan.limits.gpu_minutes, used.gpu_s,
                                                                      self._round_gpu)

    def _end(self, reason: str) -> Outcome:
        st = self.st
        if hasattr(self.proposer, "close"):
            try:
                self.proposer.close()
            except Exception as e:
                self.progress.message(f"proposer.close raised {type(e).__name__}: {e}; ignored")
        used = self._tick()
        s_i = median_attainment(st.incumbent_result)
        code = 128 + int(self.stop_signal) if self.stop_signal is not None else 3 if self.fatal_error else 0
        if code == 0 and self.writing:
            code = EXIT_NO_KERNEL
            if not self.gave_up:
                reason += (f"; no kernel written from the reference has passed every gate yet (aka optimize "
                           f"--resume {self.run_id} with a larger budget continues)")
        self._record(R.RunEnd(reason, used, st.incumbent_score, s_i, st.incumbent_sha or None, st.session, code))
        rows = summary_rows(st.seed_result, st.incumbent_result)
        before = "first passing kernel (written from the reference)" if self.plan.from_reference else "seed"
        title = f"{self.plan.op} [{self.plan.shape_set}] {self.run_id}: {before} vs final"
        if st.interpreter:
            title += " (interpreter: timings are not scores)"
        elif st.run_floor_us:
            title += f"; both scored with the run's T_floor {st.run_floor_us:.2f} us"
        if rows:
            self.progress.console.print(summary_table(rows, title))
        self.progress.message(f"stopped: {reason}. " + (f"Kernel: {self.run_dir / 'best.py'}" if st.incumbent_sha
                                                        else "No kernel."))
        return Outcome(self.run_id, reason, st.iteration - 1, st.incumbent_sha, str(self.run_dir / "best.py"),
                       st.incumbent_score, s_i, rows, st.interpreter, code)

    def _show(self, it: int, phase: str) -> None:
        st = self.st
        self.progress.update(Status(self.run_id, self.plan.op, it, st.best, "", self.last_lesson,
                                    st.used.line(self.plan.limits), phase))

    @contextmanager
    def _signals(self):
        """SIGINT/SIGTERM: finish and record the current iteration, then stop. A second SIGINT aborts."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):
            if self.stop_signal is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.stop_signal = signum
            self.progress.message(f"{signal.Signals(signum).name}: stopping after this iteration is recorded")
        old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)


def _fmt(score: float | None) -> str:
    return "untimed" if score is None else f"{score:.4f}"


def _default_feedback(contract, result, diagnoses) -> str:
    from agent.feedback import build_feedback
    return build_feedback(contract, result, diagnoses)


def _config_json(cfg) -> dict:
    from agent.config import as_dict
    return as_dict(cfg)
