"""evaluate(): the parent side of one evaluation. It owns the references, the hidden hold-out shapes, the
seeds and the verdict; the candidate runs only in a spawned worker (sandbox/worker.py).

Gates in order: lint (here, no candidate code runs) -> compile (worker: one run at a tiny shape, then the
compile gate) -> correctness (visible shapes, then hold-outs; the parent computes every reference from the
same seed and compares the output bytes the worker sends back) -> dsl and timing (GPU only) -> counters.
A bad candidate is a rejected verdict naming the cause; a harness bug raises.
"""
from __future__ import annotations

import random
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from benchmarks.hardware import Hardware
from benchmarks.roofline import roofline
from benchmarks.spec import Shape
from sandbox import correctness as cx
from sandbox import results
from sandbox.compile_cache import CompileCache
from sandbox.conversation import Conversation
from sandbox.baselines import BASELINES, unavailable
from sandbox.correctness import Rejected
from sandbox.gpu_gates import GpuGates
from sandbox.isolation import WorkerProcess
from sandbox.prestart import WorkerPool
from sandbox.settings import SandboxSettings
from sandbox.trial_evidence import TrialEvidence
from sandbox.verdict import EvalResult, ShapeResult

_HOLDOUT_PROBLEMS = {"type": "the output is not exactly a torch.Tensor", "dtype": "the output has the wrong dtype",
                     "shape": "the output has the wrong shape", "device": "the output is on the wrong device",
                     "alias": "the output shares memory with an input",
                     "stream": "the output was not ready in the caller's stream (side stream?)",
                     "layout": "the output is not contiguous (output layout rule)"}


HOLDOUT_POOLS = ("all", "visible")


@dataclass(frozen=True)
class EvalRequest:
    """One evaluation: which kernel, on which shapes, measuring what. How strictly (trials, hold-outs,
    thresholds, limits) is the run's `settings`, shared by all its evaluations."""

    op: str                                  # operator name (benchmarks.registry.load_operator)
    source: str                              # candidate file text ("" with baseline)
    shapes: tuple[Shape, ...]                # visible shapes to score
    hardware: Hardware                       # ceilings for T_roof
    settings: SandboxSettings = SandboxSettings()
    timing: bool = True                      # False: correctness only (GPU), e.g. for tests
    correctness: bool = True                 # False: timing only (no hold-outs, no counters): a verified kernel
    baseline: str | None = None              # sandbox.baselines.BASELINES: score what users run instead
    seed: int | None = None                  # None: fresh random seeds (os.urandom) per evaluation
    interpreter: bool | None = None          # None: auto (no CUDA -> Triton interpreter)
    # The source whose sealed compile cache this one's starts from (the run's incumbent: specializations this
    # source did not change are not compiled again; sandbox/compile_cache.py). None: an empty directory.
    compile_cache_from: str | None = None
    # True: compile everything in the worker's private cache (a winner's fresh-process confirmation: its time
    # never rests on binaries compiled for another source)
    private_compile: bool = False
    # Where the hidden hold-outs take their model sizes: "all" of the operator's published shapes, or the
    # "visible" ones being scored (odd token counts and ragged sizes either way). A run checks its
    # candidates at the visible models and its winners at all of them (agent/loop.py): on the H200 a
    # fused_moe hold-out at a model no scored shape uses compiled 2-6 s of new specializations, 75% of
    # the seed's 19 s evaluation and 22-76 s of a badly tuned candidate's.
    holdout_pool: str = "all"


def evaluate(req: EvalRequest, *, operator_dir: str | None = None, pool: WorkerPool | None = None,
             cache: CompileCache | None = None, progress: Callable[[str, str], None] | None = None) -> EvalResult:
    """Run every gate on one candidate (or baseline) and return the filled verdict.

    `operator_dir` loads the operator from `<operator_dir>/<op>/` instead of benchmarks/operators (tests).
    `pool` hands out pre-started workers and `cache` shares compiles per source (sandbox/session.py owns
    both for a run); without them each evaluation starts its own worker with a private cache.
    `progress(stage, activity)` is called as each gate and shape starts (hold-out shapes are named
    only as "a hidden shape"); it must not raise."""
    return _Evaluation(req, operator_dir, lint=True, pool=pool, cache=cache, progress=progress).run()


def evaluate_unlinted(req: EvalRequest, *, operator_dir: str | None = None) -> EvalResult:
    """Tests of the runtime gates only: skip the lint so that a candidate the lint would stop (os._exit,
    os.kill, subprocess) reaches the worker. Never call this on a proposer's candidate."""
    return _Evaluation(req, operator_dir, lint=False).run()


def _validate(req: EvalRequest) -> None:
    if req.baseline not in (None,) + BASELINES:
        raise ValueError(f"baseline {req.baseline!r} is not one of {BASELINES} (or None for a candidate)")
    if req.baseline and req.source.strip():
        raise ValueError("a baseline request scores the PyTorch reference: pass source=''")
    if not req.baseline and not req.source.strip():
        raise ValueError("empty candidate source: pass the candidate file text, or baseline='eager'|'compile'")
    if not req.shapes:
        raise ValueError("no shapes to evaluate: pass at least one visible Shape")
    if req.holdout_pool not in HOLDOUT_POOLS:
        raise ValueError(f"holdout_pool={req.holdout_pool!r} is not one of {HOLDOUT_POOLS}")
    req.settings.validate()


class _Evaluation(GpuGates, TrialEvidence, Conversation):
    def __init__(self, req: EvalRequest, operator_dir: str | None, lint: bool, pool: WorkerPool | None = None,
                 cache: CompileCache | None = None, progress: Callable[[str, str], None] | None = None):
        import torch
        self.progress = progress
        _validate(req)
        self.req, self.operator_dir, self.lint = req, operator_dir, lint
        self.settings, self.op, self.pool, self.cache = req.settings, req.op, pool, cache
        self._init_conversation()
        self.spec = cx.load_spec(req.op, operator_dir)
        if req.baseline and unavailable(self.spec.module, req.baseline, req.op):
            raise ValueError(unavailable(self.spec.module, req.baseline, req.op))
        cuda = torch.cuda.is_available()
        self.interpreter = (not cuda) if req.interpreter is None else bool(req.interpreter)
        if not self.interpreter and not cuda:
            raise ValueError("interpreter=False needs a CUDA GPU; none is visible to torch (leave it None for auto)")
        self.device = "cpu" if self.interpreter else "cuda"
        self.base_seed = cx.fresh_base_seed() if req.seed is None else int(req.seed)   # never recorded
        self.kernel_names: set[str] = set()
        hw = req.hardware
        self.result = EvalResult(op=req.op, interpreter=self.interpreter, hardware=hw.name, ceilings={
            "name": hw.name, "gpu_name": hw.gpu_name, "source": hw.source, "bandwidth_tbs": hw.bandwidth_tbs,
            "peaks_tflops": dict(hw.peaks_tflops)})
        self.rows = [self._row(s) for s in req.shapes]

    # ---- plan ------------------------------------------------------------------------------------
    def _dims(self, shape: Shape) -> dict[str, int]:
        return self.spec.interpreter_dims(shape.dim) if self.interpreter else shape.dim

    def _dtype(self, shape: Shape) -> str:
        return "fp32" if self.interpreter else shape.dtype   # the interpreter's bf16 arithmetic is unreliable

    def _row(self, shape: Shape, holdout: bool = False) -> ShapeResult:
        row = ShapeResult(id=shape.id, dims=dict(shape.dim), dtype=self._dtype(shape), weight=shape.weight,
                          holdout=holdout, timing_mode="interpreter" if self.interpreter else None,
                          ran_dims=self._dims(shape) if self.interpreter else None)
        if not holdout:
            rl = roofline(*self.spec.work(shape), self.req.hardware)
            row.t_roof_us, row.bound = rl.t_roof_s * 1e6, rl.bound
        return row

    def _holdouts(self) -> list[Shape]:
        req = self.req
        if not (req.settings.holdout and req.correctness) or req.baseline:
            return []
        weight_by_dtype: dict[str, float] = {}
        for s in req.shapes:
            weight_by_dtype[s.dtype] = weight_by_dtype.get(s.dtype, 0.0) + s.weight
        dtypes = sorted(weight_by_dtype, key=lambda d: -weight_by_dtype[d])
        rng = random.Random(cx.derive_seed(self.base_seed, "holdout"))   # secret: derived from an unlogged seed
        return cx.holdout_shapes(self.spec, rng, dtypes, at=req.shapes if req.holdout_pool == "visible" else None)

    # ---- run -------------------------------------------------------------------------------------
    def run(self) -> EvalResult:
        from sandbox.isolation import host_environment
        t0 = time.monotonic()
        res = self.result
        res.environment = host_environment(self.interpreter)
        res.environment.update(network_namespace=None, network_namespace_note="no worker was started")
        res.shapes = list(self.rows)
        try:
            if self.req.baseline or not self.lint or self._lint():
                self._in_worker(self._session, self._setup())
                if res.failed_stage is None and not self.interpreter and self.req.timing:
                    self._score()
        except Rejected as e:
            res.reject(e.stage, e.reason)
        finally:
            if self.device == "cuda":
                import torch
                torch.cuda.empty_cache()
            if self.cache is not None and self.req.source and res.failed_stage is None and not self.interpreter:
                self.cache.seal(self.req.source)     # later evaluations of this source reuse, never alter
            res.stage_times = self.clock.freeze()
            res.wall_s = time.monotonic() - t0
        res.verdict = "accepted" if res.failed_stage is None else "rejected"
        return res

    @property
    def activity(self) -> str:
        return self._activity

    @activity.setter
    def activity(self, text: str) -> None:   # every stage and shape sets it: the progress hook's one source
        self._activity = text
        if getattr(self, "progress", None) is not None and self.stage is not None:   # nothing started before lint
            self.progress(self.stage, "a hidden shape" if getattr(self, "in_holdout", False) else text)

    def _setup(self) -> dict:
        return {"baseline": self.req.baseline, "candidate_sources": [] if self.req.baseline else [self.req.source]}

    def _lint(self) -> bool:
        from sandbox.lint import lint_source
        self.stage, self.activity = "lint", "the static gate"
        with self._timed("lint"):
            report = lint_source(self.req.source, self.spec.name, self.spec.arg_names)
        if not report.ok:
            self.result.reject("lint", report.summary())
            return False
        self.kernel_names |= {k if isinstance(k, str) else getattr(k, "name", str(k)) for k in report.kernels}
        return True

    def _session(self, w: WorkerProcess) -> None:
        req = self.req
        if not req.baseline:
            if self._ahead():       # every visible shape's specializations, and the compile gate's, in parallel:
                with self._timed("compile_ahead"):     # the gate's first run then loads its kernels from the cache
                    self._compile_ahead(w, [self._gate_run()] + self._ahead_runs(req.shapes))
            self._compile(w)
        fast_dsl = not (self.interpreter or not req.timing or req.baseline)
        if fast_dsl:    # reject fast: a mostly-PyTorch candidate stops here, before minutes of trials
            with self._timed("dsl"):
                self._dsl(w, req.shapes[:1])
        if req.correctness:
            with self._minus_references("correctness"):
                self._check_all(w, list(zip(req.shapes, self.rows)))
            if not req.baseline:   # which kernels and CONFIGS entries each visible shape uses (for the search)
                from sandbox import launch_record
                with self._timed("launch_record"):
                    launch_record.collect(self, w, list(zip(req.shapes, self.rows)))
                if req.settings.require_features:     # --require: on those kernels (sandbox/feature_gate.py)
                    from sandbox import feature_gate
                    with self._timed("features"):
                        feature_gate.judge(self, w, list(zip(req.shapes, self.rows)))
            holdouts = self._holdouts()
            if holdouts:
                rows = [self._row(s, holdout=True) for s in holdouts]
                self.result.shapes.extend(rows)
                self.in_holdout = True
                with self._minus_references("holdouts"):
                    if self._ahead():   # only now: no hold-out dims reach the worker before (POLICY.md R8)
                        with self._timed("holdouts/compile_ahead"):
                            self._compile_ahead(w, self._ahead_runs(holdouts))
                    self._check_all(w, list(zip(holdouts, rows)), trials=req.settings.holdout_trials)
                self.in_holdout = False
        if self.interpreter or not req.timing:
            return
        if not req.baseline:
            with self._timed("dsl"):
                self._dsl(w, req.shapes[1:] if fast_dsl else req.shapes)
        self._time(w, req.shapes, self.rows)
        if req.settings.counters and req.correctness:     # full evaluations only, never an A/B re-measure
            with self._timed("counters"):
                self._counters(w)

    @contextmanager
    def _minus_references(self, stage: str):
        """Time `stage`, less the parent's own reference work inside it (counted as "references")."""
        before, t0 = self.clock.get("references"), time.monotonic()
        try:
            yield
        finally:
            self.clock.add(stage, max(0.0, time.monotonic() - t0 - (self.clock.get("references") - before)))

    # ---- compile ---------------------------------------------------------------------------------
    def _gate_run(self) -> dict:
        """The compile gate's first run: a tiny version of the first shape (dims, dtype, seed)."""
        shape = self.req.shapes[0]
        return {"dims": self.spec.interpreter_dims(shape.dim), "dtype": shape.dtype,
                "seed": cx.derive_seed(self.base_seed, "compile")}

    def _compile(self, w: WorkerProcess) -> None:
        self.stage, self.activity = "compile", "the compile gate's first run of the candidate at a tiny shape"
        w.send({"kind": "compile", **self._gate_run(), "target": "auto",
                # with correctness, the feature gate judges the kernels the scored shapes run, after the launch record
                "require_features": [] if self.req.correctness else list(self.req.settings.require_features),
                "features_later": bool(self.req.correctness and self.req.settings.require_features)})
        t0 = time.monotonic()
        reply, _ = self._expect(w, "compiled")
        in_worker = self.clock.merge(reply.get("stage_s"))
        self.clock.add("compile.pipe", max(0.0, time.monotonic() - t0 - in_worker))
        for i, k in enumerate((reply.get("info") or {}).get("kernels") or []):
            if isinstance(k, dict) and k.get("compile_s") is not None:   # part of compile.gate, listed apart
                self.clock.add(f"compile.kernel.{k.get('name')}#{i}", float(k["compile_s"]))
        self.kernel_names |= set(reply.get("kernel_names", []))
        info = dict(reply.get("info") or {})
        if reply.get("note"):
            info["note"] = reply["note"]
        self.result.compile_info = info
        if not reply.get("ok"):
            raise Rejected("compile", "compile gate: " + "; ".join(reply.get("errors") or ["compilation failed"]))
        if reply.get("missing"):
            raise Rejected("compile", f"required features missing from the compiled kernels: "
                                       f"{', '.join(reply['missing'])} (required: {', '.join(self.req.settings.require_features)})")

    def _ahead(self) -> bool:
        return bool(self.req.settings.compile_ahead) and not self.interpreter and self.device == "cuda" \
            and not self.req.baseline

    def _ahead_runs(self, shapes: list[Shape]) -> list[dict]:
        return [{"dims": self._dims(s), "dtype": self._dtype(s),
                 "seed": cx.derive_seed(self.base_seed, "compile_ahead", s.id)} for s in shapes]

    def _compile_ahead(self, w: WorkerProcess, runs: list[dict]) -> None:
        """The worker compiles the candidate's specializations for `runs` (dims, dtype, seed) in parallel
        before their trials (sandbox/compile_ahead.py); what it could not is compiled at the first call, as
        without it."""
        self.activity = "compiling ahead for the next shapes"
        w.send({"kind": "compile_ahead", "jobs": self.req.settings.compile_ahead_jobs, "shapes": runs})
        reply, _ = self._expect(w, "compiled_ahead")
        # counts only for hold-outs: a note could carry what the candidate's launcher said about their shapes
        fields = ("specializations", "children", "failed", "killed") + (() if self.in_holdout else ("notes",))
        self.result.environment["compile_ahead_holdouts" if self.in_holdout else "compile_ahead"] = {
            k: reply.get(k) for k in fields if reply.get(k) is not None}
        if not self.in_holdout:
            for part in ("inputs", "collect", "compile"):
                if isinstance(reply.get(f"{part}_s"), (int, float)):
                    self.clock.add(f"compile_ahead/{part}", float(reply[f"{part}_s"]))

    # ---- correctness -----------------------------------------------------------------------------
    def _check_all(self, w: WorkerProcess, pairs: list[tuple[Shape, ShapeResult]], trials: int | None = None) -> None:
        self.stage = "correctness"
        failures = []
        for index, (shape, row) in enumerate(pairs):
            self.activity = f"correctness trials of shape {shape.id}"
            failure = self._check_shape(w, index, shape, row, trials=trials)
            if failure:
                row.error = failure
                failures.append(failure if self.in_holdout else f"shape {shape.id} ({shape.label()}): {failure}")
        if not failures:
            return
        if self.in_holdout:
            raise Rejected("correctness", f"{len(failures)} of {len(pairs)} hidden hold-out shapes failed "
                            f"(hold-outs are drawn fresh each evaluation: odd sizes, token counts that are not powers "
                            f"of two, one larger than every published shape; a kernel special-cased to the visible "
                            f"shapes fails them). First: {failures[0]}")
        raise Rejected("correctness", " | ".join(failures))

    def _check_shape(self, w: WorkerProcess, index: int, shape: Shape, row: ShapeResult, purpose: str = "check",
                     trials: int | None = None, poison: bool = True) -> str | None:
        dims, dtype, trials = self._dims(shape), self._dtype(shape), trials or self.req.settings.trials
        seeds = [cx.derive_seed(self.base_seed, purpose, shape.id, t) for t in range(trials)]
        w.send(self._check_message(index, dims, dtype, seeds, poison=poison))
        # Each trial's reference and input digests are computed while the worker runs that trial (the first)
        # or the next one (the rest): the parent's work overlaps the candidate's (no timing happens in checks).
        expected = [self._expected(dims, dtype, seeds[0])] + [None] * (trials - 1)
        nbytes = results.nbytes(expected[0].parts)
        if self.slot is not None:
            self.slot.reserve(nbytes)     # the outputs and any arguments written in place
        failure, late = None, None
        part_of = "holdouts" if self.in_holdout else ("correctness" if purpose == "check" else purpose)
        for t in range(trials):
            t0 = time.monotonic()
            header, payload = self._expect_trial(w, nbytes)
            self.clock.add(f"{part_of}/wait", time.monotonic() - t0)   # worker time the references did not hide
            self.clock.merge(header.get("worker_s") if isinstance(header.get("worker_s"), dict) else None,
                             prefix=f"{part_of}/")
            if t + 1 < trials and failure is None:
                expected[t + 1] = self._expected(dims, dtype, seeds[t + 1])
            if failure is not None:
                continue      # drain the remaining trials of a failed shape
            failure = self._check_trial(header, payload, expected[t], dtype, row)
            expected[t] = None
            if failure is not None:
                late = (t, header, payload) if t else None
                failure = f"trial {t + 1} of {trials}: {failure}"
        self._expect(w, "checked")
        if late is not None:
            failure += self._late_failure_hint(w, index, shape, late[0], seeds, late[1], late[2], dims, dtype)
        if failure is None and purpose == "check":     # the input-write rule, once the shape has passed
            failure = self._guarded_trial(w, index, shape, row, seeds[0], dims, dtype)
        return failure

    def _check_message(self, index: int, dims, dtype: str, seeds: list[int], **extra) -> dict:
        """A `check` request: the trials' seeds and the outputs the worker must find (sandbox/results.py)."""
        parts = results.output_parts(self.spec, dims, dtype)
        if self.slot is not None:
            self.slot.reserve(results.nbytes(parts))
        outputs = [p.to_json() for p in parts]
        return {"kind": "check", "index": index, "dims": dims, "dtype": dtype, "seeds": seeds, "outputs": outputs,
                "seal": self.in_holdout, "poison": True, **extra}

    def _expected(self, dims, dtype, seed, calls: int = 1) -> results.Expected:
        """The parent's own inputs from the same seed: the digests of the arguments the call must not write,
        and the reference's outputs and mutated arguments (sandbox/results.py)."""
        with self._timed("references"):
            with self._timed("references/inputs"):
                inputs = self.spec.make_inputs(dims, dtype, seed, self.device)
            with _reference_numerics():
                return results.expected(self.spec, inputs, dims, dtype, seed, calls=calls,
                                        keep_inputs=self.spec.check is not None, timed=self._timed)

    def _check_trial(self, header, payload, expected: results.Expected, in_dtype: str, row) -> str | None:
        if header.get("problem"):
            if self.in_holdout:
                kind = header.get("problem_kind")
                if kind == "type" and not results.single(self.spec):
                    return "the call's return value does not have the operator's form (a tuple of its OUTPUTS, or None)"
                return _HOLDOUT_PROBLEMS.get(kind, "the output was rejected")
            return str(header["problem"])
        drawn = header.get("digests_before")
        differed = cx.digest_mismatches(expected.digests, drawn) if isinstance(drawn, dict) else []
        if differed:
            return input_draw_failure(self.spec.name, differed)
        changed = cx.digest_mismatches(expected.digests, header.get("digests"))
        if changed:
            return (f"input(s) {', '.join(changed)} changed during the call (digest after the call differs): a "
                    f"candidate must not write into its inputs{results.describe_unchanged_rule(self.spec)}; "
                    f"allocate the output and any scratch space")
        got = results.decode(self.spec, header, payload, expected.parts)
        if isinstance(got, str):
            return got
        with self._timed("references"), self._timed("references/judge"):
            failure, stats = results.judge(self.spec, got, expected, in_dtype, detail=not self.in_holdout)
        for st in stats:
            row.max_abs_err = max(row.max_abs_err or 0.0, st.max_abs_err)
            row.max_rel_err = max(row.max_rel_err or 0.0, st.max_rel_err)
            row.rel_l2 = max(row.rel_l2 or 0.0, st.rel_l2)
        return failure


def input_draw_failure(op: str, names: list[str]) -> str:
    """The reason when the worker's inputs differed from the parent's before the candidate ran: the trial says
    nothing about the candidate, and the message must not blame it."""
    return (f"aka error, not the candidate's: input(s) {', '.join(names)} already differed between the worker and "
            f"the parent before the call, drawn from the same seed: {op}'s make_inputs is not deterministic across "
            f"processes (or global state such as torch's default dtype changed what it draws); report it with this "
            f"message. The candidate was not judged on this trial")


class _reference_numerics:
    """References in full fp32: no TF32 in matmuls or convolutions (restored afterwards)."""

    def __enter__(self):
        import torch
        self._saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self._grad = torch.no_grad()
        self._grad.__enter__()

    def __exit__(self, *exc):
        import torch
        self._grad.__exit__(*exc)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self._saved
