"""evaluate(): the parent side of one evaluation. It owns the references, the hidden hold-out shapes, the
seeds and the verdict; the candidate runs only in a spawned worker (sandbox/worker.py).

Gates in order: lint (here, no candidate code runs) -> compile (worker: one run at a tiny shape, then the
compile gate) -> correctness (visible shapes, then hold-outs; the parent computes every reference from the
same seed and compares the output bytes the worker sends back) -> dsl and timing (GPU only) -> counters.
A bad candidate is a rejected verdict naming the cause; a harness bug raises.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from benchmarks.hardware import Hardware
from benchmarks.roofline import roofline
from benchmarks.spec import Shape
from sandbox import correctness as cx
from sandbox.baselines import BASELINES, unavailable
from sandbox.correctness import HarnessError, Rejected
from sandbox.gpu_gates import GpuGates
from sandbox.isolation import WorkerFailure, WorkerProcess
from sandbox.verdict import EvalResult, ShapeResult

_HOLDOUT_PROBLEMS = {"type": "the output is not exactly a torch.Tensor", "dtype": "the output has the wrong dtype",
                     "shape": "the output has the wrong shape", "device": "the output is on the wrong device",
                     "alias": "the output shares memory with an input",
                     "stream": "the output was not ready in the caller's stream (side stream?)"}


@dataclass(frozen=True)
class EvalRequest:
    op: str                                  # operator name (benchmarks.registry.load_operator)
    source: str                              # candidate file text ("" with baseline)
    shapes: tuple[Shape, ...]                # visible shapes to score
    hardware: Hardware                       # ceilings for T_roof
    trials: int = 3
    holdout: bool = True
    timing: bool = True                      # False: correctness only (GPU), e.g. for tests
    correctness: bool = True                 # False: timing only, for A/B re-measures of a verified kernel
    dsl_threshold: float = 0.9
    counters: bool = False
    counter_shapes: int = 2
    timeout_s: float = 900.0
    require_features: tuple[str, ...] = ()
    baseline: str | None = None              # sandbox.baselines.BASELINES: score what users run instead
    seed: int | None = None                  # None: fresh random seeds (os.urandom) per evaluation
    network_namespace: bool = True
    gpu_memory_fraction: float = 0.9
    interpreter: bool | None = None          # None: auto (no CUDA -> Triton interpreter)


def evaluate(req: EvalRequest, *, operator_dir: str | None = None) -> EvalResult:
    """Run every gate on one candidate (or baseline) and return the filled verdict.

    `operator_dir` loads the operator from `<operator_dir>/<op>/` instead of benchmarks/operators (tests)."""
    return _Evaluation(req, operator_dir, lint=True).run()


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
    if req.trials < 1:
        raise ValueError(f"trials={req.trials}: at least 1 correctness trial per shape is needed (3 is the default)")
    if not 0 < req.gpu_memory_fraction <= 1:
        raise ValueError(f"gpu_memory_fraction={req.gpu_memory_fraction} must be in (0, 1]")
    if req.timeout_s <= 0:
        raise ValueError(f"timeout_s={req.timeout_s} must be positive")
    if not 0 <= req.dsl_threshold <= 1:
        raise ValueError(f"dsl_threshold={req.dsl_threshold} must be a share in [0, 1] (0.9 is the default)")


class _Evaluation(GpuGates):
    def __init__(self, req: EvalRequest, operator_dir: str | None, lint: bool):
        import torch
        _validate(req)
        self.req, self.operator_dir, self.lint = req, operator_dir, lint
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
        self.stage: str | None = None        # the gate whose request is in flight
        self.activity = "starting the worker"
        self.in_holdout = False
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
        row = ShapeResult(id=shape.id, dims=self._dims(shape), dtype=self._dtype(shape), weight=shape.weight,
                          holdout=holdout, timing_mode="interpreter" if self.interpreter else None)
        if not holdout:
            rl = roofline(*self.spec.work(shape), self.req.hardware)
            row.t_roof_us, row.bound = rl.t_roof_s * 1e6, rl.bound
        return row

    def _holdouts(self) -> list[Shape]:
        req = self.req
        if not (req.holdout and req.correctness) or req.baseline:
            return []
        weight_by_dtype: dict[str, float] = {}
        for s in req.shapes:
            weight_by_dtype[s.dtype] = weight_by_dtype.get(s.dtype, 0.0) + s.weight
        dtypes = sorted(weight_by_dtype, key=lambda d: -weight_by_dtype[d])
        rng = random.Random(cx.derive_seed(self.base_seed, "holdout"))   # secret: derived from an unlogged seed
        return cx.holdout_shapes(self.spec, rng, dtypes)

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
                self._in_worker(self._session)
                if res.failed_stage is None and not self.interpreter and self.req.timing:
                    self._score()
        except Rejected as e:
            res.reject(e.stage, e.reason)
        finally:
            res.wall_s = time.monotonic() - t0
            if self.device == "cuda":
                import torch
                torch.cuda.empty_cache()
        res.verdict = "accepted" if res.failed_stage is None else "rejected"
        return res

    def _lint(self) -> bool:
        from sandbox.lint import lint_source
        report = lint_source(self.req.source, self.spec.name, self.spec.arg_names)
        if not report.ok:
            self.result.reject("lint", report.summary())
            return False
        self.kernel_names |= {k if isinstance(k, str) else getattr(k, "name", str(k)) for k in report.kernels}
        return True

    def _in_worker(self, body) -> None:
        """Run `body(worker)` in a fresh worker; its failures become rejections at the gate in flight."""
        req, res = self.req, self.result
        self.stage, self.in_holdout = None, False      # a worker that dies before loading is our bug
        with WorkerProcess(interpreter=self.interpreter, timeout_s=req.timeout_s,
                           network_namespace=req.network_namespace) as w:
            res.environment.update(network_namespace=w.network_namespace, network_namespace_note=w.network_note)
            try:
                self._open(w)
                body(w)
                w.finish()
            except WorkerFailure as e:
                if self.stage is None:
                    raise HarnessError(f"the worker failed before the candidate was loaded: {e.reason}\n"
                                       f"stderr:\n{w.stderr_tail()}") from None
                where = "a hidden hold-out shape" if self.in_holdout else self.activity
                raise Rejected(self.stage, f"{e.reason}, during {where}") from None
            finally:
                if not res.stdout_tail and not res.stderr_tail:
                    res.stdout_tail, res.stderr_tail = w.stdout_tail(), w.stderr_tail()

    def _expect(self, w: WorkerProcess, kind: str, max_payload: int = 1 << 20) -> tuple[dict, bytes]:
        header, payload = w.recv(max_payload)
        got = header["kind"]
        if got == "harness_error":
            raise HarnessError(f"worker harness error while handling {header.get('request')!r}:\n"
                               f"{header.get('traceback', '')}")
        if got == "error":
            message = str(header.get("error", ""))
            if self.in_holdout:   # its message could name the hidden shape
                oom = " (out of memory)" if message.startswith("out of memory") else ""
                message = (f"the candidate raised {str(header.get('exc_type') or 'an exception')[:80]}{oom} "
                           f"(message withheld: it could reveal the shape)")
            where = "a hidden hold-out shape" if self.in_holdout else self.activity
            raise Rejected(self.stage or "compile", f"{message} (during {where})")
        if got != kind:
            raise Rejected(self.stage or "compile", f"protocol violation on the private result pipe: expected "
                                                     f"a {kind!r} reply, got {got!r}")
        return header, payload

    def _open(self, w: WorkerProcess) -> None:
        hello, _ = self._expect(w, "ready")
        if "triton_error" in hello and not self.req.baseline:
            raise HarnessError(f"triton does not import in the worker: {hello['triton_error']}")
        self.result.environment.update(worker_torch=hello.get("torch"), worker_triton=hello.get("triton"),
                                       worker_loopback=hello.get("loopback"))
        self.stage, self.activity = "compile", "loading the candidate"
        candidate_path = None
        if not self.req.baseline:
            candidate_path = str(w.workdir / "candidate.py")
            with open(candidate_path, "w") as f:
                f.write(self.req.source)
        w.send({"kind": "setup", "op": self.req.op, "operator_dir": self.operator_dir, "device": self.device,
                "interpreter": self.interpreter, "memory_fraction": self.req.gpu_memory_fraction,
                "baseline": self.req.baseline, "candidate_path": candidate_path, "sealed_path": str(w.sealed_path)})
        loaded, _ = self._expect(w, "loaded")
        self.result.environment["device_name"] = loaded.get("device_name")

    def _session(self, w: WorkerProcess) -> None:
        req = self.req
        if not req.baseline:
            self._compile(w)
        if req.correctness:
            self._check_all(w, list(zip(req.shapes, self.rows)))
            holdouts = self._holdouts()
            if holdouts:
                rows = [self._row(s, holdout=True) for s in holdouts]
                self.result.shapes.extend(rows)
                self.in_holdout = True
                self._check_all(w, list(zip(holdouts, rows)))
                self.in_holdout = False
        if self.interpreter or not req.timing:
            return
        if not req.baseline:
            self._dsl(w)
        self._time(w, req.shapes, self.rows)
        if req.counters:
            self._counters(w)

    # ---- compile ---------------------------------------------------------------------------------
    def _compile(self, w: WorkerProcess) -> None:
        shape = self.req.shapes[0]
        self.stage, self.activity = "compile", "the compile gate's first run of the candidate at a tiny shape"
        w.send({"kind": "compile", "dims": self.spec.interpreter_dims(shape.dim), "dtype": shape.dtype,
                "seed": cx.derive_seed(self.base_seed, "compile"), "target": "auto",
                "require_features": list(self.req.require_features)})
        reply, _ = self._expect(w, "compiled")
        self.kernel_names |= set(reply.get("kernel_names", []))
        info = dict(reply.get("info") or {})
        if reply.get("note"):
            info["note"] = reply["note"]
        self.result.compile_info = info
        if not reply.get("ok"):
            raise Rejected("compile", "compile gate: " + "; ".join(reply.get("errors") or ["compilation failed"]))
        if reply.get("missing"):
            raise Rejected("compile", f"required features missing from the compiled kernels: "
                                       f"{', '.join(reply['missing'])} (required: {', '.join(self.req.require_features)})")

    # ---- correctness -----------------------------------------------------------------------------
    def _check_all(self, w: WorkerProcess, pairs: list[tuple[Shape, ShapeResult]]) -> None:
        self.stage = "correctness"
        failures = []
        for index, (shape, row) in enumerate(pairs):
            self.activity = f"correctness trials of shape {shape.id}"
            failure = self._check_shape(w, index, shape, row)
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
        import torch
        dims, dtype, trials = self._dims(shape), self._dtype(shape), trials or self.req.trials
        out_shape, out_dtype = self.spec.output_spec(dims, dtype)
        tol = cx.tolerance_for(self.spec, out_dtype, dtype)
        nbytes = math.prod(out_shape) * torch.empty(0, dtype=cx.torch_dtype(out_dtype)).element_size()
        seeds = [cx.derive_seed(self.base_seed, purpose, shape.id, t) for t in range(trials)]
        w.send({"kind": "check", "index": index, "dims": dims, "dtype": dtype, "seeds": seeds,
                "out_shape": list(out_shape), "out_dtype": out_dtype, "seal": self.in_holdout, "poison": poison})
        failure, passed_before = None, False
        for t in range(trials):
            header, payload = self._expect(w, "trial", max_payload=nbytes)
            if failure is not None:
                continue      # drain the remaining trials of a failed shape
            failure = self._check_trial(header, payload, dims, dtype, seeds[t], out_shape, out_dtype, tol, row)
            if failure is not None:
                if passed_before:
                    failure += (" (earlier trials passed with the same input buffers: a result cached by pointer "
                                "or shape goes stale when the inputs change)")
                failure = f"trial {t + 1} of {trials}: {failure}"
            passed_before = failure is None
        self._expect(w, "checked")
        return failure

    def _check_trial(self, header, payload, dims, dtype, seed, out_shape, out_dtype, tol, row) -> str | None:
        import torch
        if header.get("problem"):
            if self.in_holdout:
                return _HOLDOUT_PROBLEMS.get(header.get("problem_kind"), "the output was rejected")
            return str(header["problem"])
        inputs = self.spec.make_inputs(dims, dtype, seed, self.device)
        changed = cx.digest_mismatches(cx.input_digests(inputs, seed), header.get("digests"))
        if changed:
            return (f"input(s) {', '.join(changed)} changed during the call (digest after the call differs): a "
                    f"candidate must not write into its inputs; allocate the output and any scratch space")
        if header.get("dtype") != out_dtype or tuple(header.get("shape", ())) != tuple(out_shape):
            return f"output dtype/shape {header.get('dtype')}/{header.get('shape')} is not {out_dtype}/{list(out_shape)}"
        with _reference_numerics():
            ref = self.spec.reference(**inputs)
        if len(payload) != ref.numel() * ref.element_size():
            return f"the output came back with {len(payload)} bytes, expected {ref.numel() * ref.element_size()}"
        out = (torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else torch.empty(0, dtype=torch.uint8))
        out = out.view(cx.torch_dtype(out_dtype)).reshape(out_shape).to(ref.device)
        stats = cx.compare(out, ref, tol)
        row.max_abs_err = max(row.max_abs_err or 0.0, stats.max_abs_err)
        row.max_rel_err = max(row.max_rel_err or 0.0, stats.max_rel_err)
        row.rel_l2 = max(row.rel_l2 or 0.0, stats.rel_l2)
        return None if stats.passed else stats.describe(tol, detail=not self.in_holdout)


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
