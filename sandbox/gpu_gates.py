"""The GPU half of the parent's evaluation: DSL share, timing, counters, scoring and the re-measure of
suspect shapes. A mixin of sandbox.evaluation._Evaluation (it uses its request, rows, worker helpers);
every number here was measured in the worker, and every verdict is decided here, in the parent.
"""
from __future__ import annotations

import time

from benchmarks.scoring import operator_score, score_shape, weighted_attainment
from sandbox import correctness as cx
from sandbox import results
from sandbox.correctness import Rejected
from sandbox.isolation import WorkerFailure, WorkerProcess

TIMED_REPLAY_RULE = ("timed-replay rule: the CUDA graph that was timed, replayed once on fresh input values copied "
                     "into its input buffers, does not compute the operator's result")

TIMING_INPUT_SETS = 4     # rotated input sets per timed shape (the worker caps them at 1 GiB)


def add_hold_stats(total: dict, part: dict | None) -> dict:
    """Sum a worker reply's hold counts (benchmarks/gpu_timer.py held_batch: timed batches, held, retried,
    unheld) into `total`, which the evaluation keeps as environment["timing_hold"]: a batch counted unheld was
    queued while the GPU already ran it, so a host delay may sit inside its intervals."""
    for k, v in (part or {}).items():
        if isinstance(v, int) and not isinstance(v, bool):
            total[k] = total.get(k, 0) + v
    return total


class GpuGates:
    def _dsl(self, w: WorkerProcess, shapes=None) -> None:
        """Attribution (DESIGN.md section 4): the call's compute time must be the candidate's own kernels.
        Neutral work (memsets, copies, constant fills) is reported, never counted; any other kernel is foreign
        compute, allowed up to FOREIGN_COMPUTE_MAX_SHARE of the compute time (and settings.dsl_threshold)."""
        from sandbox.timing import FOREIGN_COMPUTE_MAX_SHARE, Attribution
        self.stage = "dsl"
        for shape in self.req.shapes if shapes is None else shapes:
            self.activity = f"profiling shape {shape.id} for the attribution of its GPU time"
            w.send({"kind": "dsl", "dims": shape.dim, "dtype": shape.dtype, "kernel_names": sorted(self.kernel_names),
                    "seed": cx.derive_seed(self.base_seed, "dsl", shape.id)})
            rec = dict(self._expect(w, "dsl")[0]["attribution"])
            att = Attribution(own_us=float(rec["own_us"]), foreign_us=dict(rec["foreign_us"]),
                              neutral_us=dict(rec["neutral_us"]))
            self.result.attribution[shape.id] = att.to_json()
            share = att.own_share
            self.result.dsl_share = share if self.result.dsl_share is None else min(self.result.dsl_share, share)
            own = ", ".join(sorted(self.kernel_names)) or "none"
            if att.own_us <= 0.0:
                raise Rejected("dsl", f"shape {shape.id}: none of the candidate's @triton.jit kernels ({own}) ran on "
                                      f"the GPU in the profiled calls ({_named(att)}); compute the result in your "
                                      f"Triton kernels")
            limit = min(FOREIGN_COMPUTE_MAX_SHARE, 1.0 - self.settings.dsl_threshold)
            if att.foreign_share > limit:
                raise Rejected("dsl", f"shape {shape.id}: attribution rule: {att.foreign_share:.1%} of the call's "
                                      f"compute time is in kernels that are not the candidate's own ({own}); at most "
                                      f"{limit:.0%} is allowed (memsets, copies and constant fills are not counted). "
                                      f"Foreign kernels: {_named(att)}. Compute the result in your Triton kernels, "
                                      f"not with PyTorch ops or library calls")

    def _time(self, w: WorkerProcess, shapes, rows) -> None:
        self.stage, self.activity = "timing", "measuring the latency floor"
        with self._timed("floor"):
            w.send({"kind": "floor"})
            reply = self._expect(w, "floor")[0]
            floor_s = float(reply["t_floor_s"])
        # both launches' floors, for the trail: which one moved when processes disagree (agent/run_floor.py)
        self.result.environment["floor_us"] = {k: None if v is None else v * 1e6
                                               for k, v in (reply.get("parts_s") or {}).items()}
        # summed over the workers that timed (a re-measure of suspect shapes runs a second)
        hold = add_hold_stats(self.result.environment.setdefault("timing_hold", {}), reply.get("hold"))
        for index, (shape, row) in enumerate(zip(shapes, rows)):
            self.stage, self.activity = "timing", f"timing shape {shape.id}"
            replay_seed = cx.derive_seed(self.base_seed, "replay", shape.id) if self.req.correctness else None
            limit = self._out_nbytes(shape)      # before the request: no parent GPU work while the worker times
            # a timing-only evaluation (a run's screens, confirmations and baselines) times eager launches only
            # when the graph cannot be captured: the score is the graph time; full evaluations report both
            w.send({"kind": "time", "dims": shape.dim, "dtype": shape.dtype, "replay_seed": replay_seed,
                    "eager": bool(self.req.correctness),
                    "seeds": [cx.derive_seed(self.base_seed, "time", shape.id, k) for k in range(TIMING_INPUT_SETS)]})
            t, payload = self._expect(w, "timing", max_payload=limit)
            self.clock.merge(t.get("stage_s"))
            add_hold_stats(hold, t.get("hold"))
            if replay_seed is not None:
                self._check_replay(shape, t.get("replay") or {}, payload, replay_seed)
            graph, eager = t.get("t_graph_s"), t.get("t_eager_s")
            if graph is None and eager is None:
                raise Rejected("timing", f"shape {shape.id}: no time was measured ({t.get('graph_error')})")
            row.t_us = (graph if graph is not None else eager) * 1e6
            row.t_eager_us = eager * 1e6 if eager is not None else None
            row.t_floor_us = floor_s * 1e6
            row.timing_mode = "graph" if graph is not None else "eager"
            if graph is None and not any(r.startswith(f"shape {shape.id}: CUDA-graph") for r in self.result.reasons):
                self.result.reasons.append(f"shape {shape.id}: CUDA-graph capture failed "
                                           f"({str(t.get('graph_error'))[:300]}); timed eagerly, so host launch "
                                           f"overhead is included (avoid host syncs like .item()/.tolist()/.cpu())")
            if self.req.correctness:
                with self._minus_references("recheck"):
                    self._recheck(w, index, shape, row)
            self.stage = "timing"

    def _out_nbytes(self, shape) -> int:
        """The most payload a timing reply may carry: the outputs and, for MUTATES, the written arguments
        (their sizes read from inputs made here, before the worker times anything)."""
        parts = results.output_parts(self.spec, shape.dim, shape.dtype)
        if self.spec.mutates:
            inputs = self.spec.make_inputs(shape.dim, shape.dtype, 0, self.device)
            parts = results.parts_of(self.spec, shape.dim, shape.dtype, inputs)
            del inputs
        return max(results.nbytes(parts), 1 << 20)

    def _check_replay(self, shape, replay: dict, payload: bytes, seed: int) -> None:
        """What is timed is what was checked (DESIGN.md section 4): the timed graph's outputs (and the arguments
        it writes in place) on fresh values against the reference the parent computes from the same seed."""
        if not replay.get("checked"):
            note = replay.get("note")
            if note and "timed eagerly" not in str(note):
                self.result.reasons.append(f"shape {shape.id}: the timed graph's replay was not checked ({note})")
            return
        expected = self._expected(shape.dim, shape.dtype, seed, calls=int(replay.get("calls") or 1))
        got = results.decode(self.spec, replay, payload, expected.parts)
        if isinstance(got, str):
            raise Rejected("timing", f"shape {shape.id}: {TIMED_REPLAY_RULE}: its output came back wrong: {got}")
        failure, _ = results.judge(self.spec, got, expected, shape.dtype)
        if failure:
            raise Rejected("timing", f"shape {shape.id}: {TIMED_REPLAY_RULE}: {failure}. The same "
                                     f"call passed the correctness trials, so it behaves differently while captured "
                                     f"into a graph or after its first calls (a call counter, capture detection, "
                                     f"work skipped once state says done): the time measured is not of the "
                                     f"checked computation")

    def _recheck(self, w: WorkerProcess, index: int, shape, row) -> None:
        """One more trial right after the shape's timed calls, under timing's conditions (no poisoned
        allocations, no scrub): a kernel that skips work once its own state says "done" (a flag kept in a
        reused allocation, a cache that switches on after the first calls) returns a stale result here."""
        self.stage, self.activity = "correctness", f"the correctness re-check of shape {shape.id} after timing"
        failure = self._check_shape(w, index, shape, row, purpose="recheck", trials=1, poison=False)
        if failure:
            row.error = failure
            raise Rejected("correctness", f"shape {shape.id} ({shape.label()}): right after its timed calls, "
                                          f"{failure} (it passed before timing: the kernel's output depends on "
                                          f"state left by earlier calls)")

    def _counters(self, w: WorkerProcess) -> None:
        top = sorted(self.req.shapes, key=lambda s: -s.weight)[: max(0, self.settings.counter_shapes)]
        if not top:
            return
        dtype = top[0].dtype
        self.activity = "collecting Nsight Compute counters"
        remaining = max(30.0, w.deadline - time.monotonic() - 10.0)
        try:
            w.send({"kind": "counters", "op": self.req.op, "dtype": dtype,
                    "dims_list": [s.dim for s in top if s.dtype == dtype], "timeout_s": min(600.0, remaining)})
            self.result.counters = dict(self._expect(w, "counters")[0]["record"])
        except (WorkerFailure, Rejected) as e:   # counters inform; they never decide the verdict
            self.result.counters = {"available": False, "reason": f"counter collection failed: {e}"}

    def _score(self) -> None:
        res, shapes = self.result, self.req.shapes
        # A time at or below 0 is the timer's failure, not the kernel's (a 36 us kernel read -1.3 us beside a busy
        # host, session 37): re-measured in a fresh worker like a time that beat T_ref
        unmeasured = {s.id: r.t_us for s, r in zip(shapes, self.rows) if r.t_us is not None and r.t_us <= 0}
        suspects = [(s, r) for s, r in zip(shapes, self.rows) if s.id in unmeasured or (
                    r.t_roof_us and r.t_us and max(r.t_roof_us, r.t_floor_us) / r.t_us > 1.0)]
        if suspects:
            first = {s.id: max(r.t_roof_us, r.t_floor_us) / r.t_us for s, r in suspects if s.id not in unmeasured}
            self.activity = "re-measuring suspect shapes in a fresh worker"
            with self._timed("remeasure"):
                self._in_worker(lambda w: self._time(w, [s for s, _ in suspects], [r for _, r in suspects]),
                                self._setup())
            for s, r in suspects:
                if s.id in unmeasured:
                    if r.t_us <= 0:
                        raise Rejected("timing", f"shape {s.id}: the timer read {unmeasured[s.id]:.2f} us, then "
                                                 f"{r.t_us:.2f} us in a fresh worker: not a time (timed batches "
                                                 f"{self.result.environment.get('timing_hold')}; unheld ones ran "
                                                 f"while the host was still queueing them). Time it again on a "
                                                 f"quieter host")
                    res.reasons.append(f"shape {s.id}: the timer read {unmeasured[s.id]:.2f} us; re-measured in a "
                                       f"fresh worker: {r.t_us:.2f} us")
                    continue
                ratio = max(r.t_roof_us, r.t_floor_us) / r.t_us
                if ratio > 1.0:
                    r.suspect = True
                    res.flags.append(f"shape {s.id}: T={r.t_us:.2f} us beat T_ref={max(r.t_roof_us, r.t_floor_us):.2f} us "
                                     f"twice (ratio {first[s.id]:.2f}, then {ratio:.2f} in a fresh worker): flagged "
                                     f"for review; attainment capped at 1")
                else:
                    res.reasons.append(f"shape {s.id}: first measure beat T_ref (ratio {first[s.id]:.2f}); "
                                       f"re-measured in a fresh worker: {ratio:.2f}")
        scores = []
        for s, r in zip(shapes, self.rows):
            sc = score_shape(s.id, s.weight, r.t_us * 1e-6, r.t_roof_us * 1e-6, r.t_floor_us * 1e-6)
            r.attainment, r.suspect = sc.attainment, r.suspect or sc.suspect
            scores.append(sc)
        res.s_i, res.weighted_attainment = operator_score(scores), weighted_attainment(scores)


def _named(att) -> str:
    parts = [f"{k[:120]} ({us:.1f} us, {share:.1%})" for k, us, share in att.top_foreign(3)]
    return "; ".join(parts) or "no foreign kernels"
