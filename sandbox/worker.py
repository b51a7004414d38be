"""The child process: `python -m sandbox.worker --requests FD --replies FD`. It runs candidate code; it
owns no reference, no hold-out shape it has not been sent, and no verdict.

It answers the parent's requests one at a time over the private pipes (sandbox/protocol.py):
setup (load the candidate), compile (one run at a tiny shape under LaunchRecorder, then the compile
gate), compile_ahead (the next shapes' specializations compiled in forked processes: sandbox/compile_ahead.py),
check (correctness trials: fresh inputs re-filled into the same buffers, poisoned memory,
output and digests sent back), dsl, floor, time, counters, ab_time (two kernels interleaved: sandbox/ab.py),
quit. A failure of the candidate is
reported as {"kind": "error"} and the worker exits: after a CUDA error a process is never reused.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import resource
import signal
import sys
import time
import traceback

from sandbox import protocol
from sandbox.settings import WARM_STAGES

CANDIDATE_MODULE = "aka_candidate"
MAX_INPUT_SET_BYTES = 1 << 30     # rotated timing input sets: at most 1 GiB of them per shape
MAX_INPUT_SETS = 4


class CandidateFailure(Exception):
    """Something the candidate did (raised, exited, crashed CUDA, ran out of memory).

    An Exception (not BaseException) on purpose: the timing code may catch it during graph capture
    and fall back to eager timing."""

    def __init__(self, message: str, fatal: bool = False, exc_type: str = ""):
        super().__init__(message)
        self.message, self.fatal, self.exc_type = message, fatal, exc_type


def _is_cuda_or_oom(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return isinstance(exc, MemoryError) or type(exc).__name__ in ("OutOfMemoryError", "AcceleratorError") or any(
        s in text for s in ("CUDA error", "CUDA out of memory", "illegal memory access", "can't allocate memory",
                            "CUBLAS_STATUS", "misaligned address", "unspecified launch failure"))


def describe_exception(exc: BaseException) -> str:
    """`Type: message` plus the last frames inside the candidate's file, bounded for the feedback."""
    if isinstance(exc, SystemExit):
        return f"the candidate raised SystemExit({exc.code!r}): exiting the process is not allowed"
    if isinstance(exc, KeyboardInterrupt):
        return "the candidate raised KeyboardInterrupt"
    msg = f"{type(exc).__name__}: {exc}"
    if _is_cuda_or_oom(exc) and ("out of memory" in msg.lower() or "can't allocate memory" in msg
                                 or isinstance(exc, MemoryError)):
        msg = "out of memory: " + msg
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith("candidate.py")]
    where = "".join(f"\n  candidate.py line {f.lineno} in {f.name}: {f.line}" for f in frames[-3:])
    return (msg[:1500] + (" ..." if len(msg) > 1500 else "")) + where


def _failure(exc: BaseException, prefix: str = "") -> CandidateFailure:
    return CandidateFailure(prefix + describe_exception(exc), fatal=_is_cuda_or_oom(exc), exc_type=type(exc).__name__)


class Worker:
    def __init__(self, rx: int, tx: int):
        self.rx, self.tx = rx, tx
        self.fn = None
        self.spec = None
        self.candidate_path: str | None = None
        self.fn_b = None                      # the second kernel of an A/B re-measure
        self.cache_dirs = (None, None)        # and each kernel's compile cache directory (sandbox/ab.py)
        self._held_buffers: dict | None = None   # the last check's input buffers, for a `fresh` re-run
        self.interpreter = False
        self.loopback: str | None = None
        self.prepare = lambda inputs: inputs   # a library baseline's input form (sandbox/baselines.py)
        self.launch_recorders: dict = {}      # visible shapes' launch recorders, for sandbox/feature_gate.py
        self.slot = None                      # the parent's output slot, once set up (sandbox/output_slot.py)
        self._inputs_s = self._send_s = 0.0   # the next trial's input draw and the last reply, for its worker_s

    # ---- plumbing --------------------------------------------------------------------------------
    def reply(self, header: dict, payload=b"") -> None:
        protocol.send(self.tx, header, payload)

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()   # device-wide: work on any stream must finish

    def call(self, inputs: dict):
        """Run the candidate once. Everything it raises (SystemExit too) becomes a CandidateFailure."""
        try:
            out = self.fn(**inputs)
            self.sync()
            return out
        except BaseException as e:  # noqa: BLE001 - the candidate must not end or escape the worker
            raise _failure(e) from None

    def make_inputs(self, dims: dict, dtype: str, seed: int) -> dict:
        return self.spec.make_inputs(dict(dims), dtype, int(seed), self.device)

    # ---- requests --------------------------------------------------------------------------------
    def on_setup(self, msg: dict) -> None:
        from sandbox.correctness import load_spec
        self.spec = load_spec(msg["op"], msg.get("operator_dir"))
        self.interpreter = bool(msg["interpreter"])
        self.sealed_path = msg["sealed_path"]
        self.slot = None
        if msg.get("output_slot"):      # outputs' bytes travel through it, not the pipe (sandbox/output_slot.py)
            from sandbox.output_slot import SlotWriter
            try:
                self.slot = SlotWriter(msg["output_slot"])
            except OSError:             # a file this process cannot open: every output takes the pipe
                self.slot = None
        if msg.get("cache_dir"):
            # triton reads TRITON_CACHE_DIR when it compiles, not at import: set before the candidate loads
            os.environ["TRITON_CACHE_DIR"] = msg["cache_dir"]
        if not self.interpreter and msg["device"] == "cuda":
            from sandbox import compile as compile_gate
            compile_gate.IN_PROCESS = bool(msg.get("compile_in_worker", False))
        t0 = time.monotonic()
        device_name = self._set_device(msg["device"], float(msg.get("memory_fraction", 0.9)))
        t_device = time.monotonic() - t0
        baseline = msg.get("baseline")
        if baseline:   # what a user runs instead (sandbox/baselines.py): our code, never the candidate's
            from sandbox.baselines import build
            chosen = build(self.spec.module, baseline)
            self.fn, self.prepare = chosen.fn, chosen.prepare
        else:
            self.candidate_path = msg["candidate_path"]
            self.fn = self._load_candidate(self.candidate_path, msg["op"])
        if msg.get("ab_path"):     # an A/B re-measure: the other kernel in the same worker (sandbox/ab.py)
            self.fn_b = self._load_candidate(msg["ab_path"], msg["op"], CANDIDATE_MODULE + "_b")
            self.cache_dirs = (msg.get("cache_dir"), msg.get("ab_cache_dir"))     # each kernel's own
        self.reply({"kind": "loaded", "device_name": device_name, "stage_s": {"cuda_init": t_device}})

    def _set_device(self, kind: str, memory_fraction: float) -> str:
        """Before the candidate is imported: the GPU memory cap must already hold when its code first runs."""
        torch = self.torch
        if kind != "cuda":
            self.device = torch.device("cpu")
            return "cpu"
        if not torch.cuda.is_available():
            raise RuntimeError("the parent asked for a CUDA worker, but torch in the worker sees no GPU")
        torch.cuda.set_device(0)
        torch.cuda.set_per_process_memory_fraction(memory_fraction, 0)
        self.device = torch.device("cuda", 0)
        return torch.cuda.get_device_name(0)

    def _load_candidate(self, path: str, op: str, module_name: str = CANDIDATE_MODULE):
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        except BaseException as e:  # noqa: BLE001
            raise _failure(e, "importing the candidate failed: ") from None
        fn = getattr(module, op, None)
        if not callable(fn):
            raise CandidateFailure(f"the candidate defines no function {op}(...); it must define a function "
                                   f"named after the operator")
        return fn

    def on_compile(self, msg: dict) -> None:
        from sandbox.compile import compile_recorded, feature_check
        from sandbox.feature_gate import record_run
        t0 = time.monotonic()
        recorder, note = record_run(self, msg["dims"], msg["dtype"], msg["seed"])   # fp32 retry in the interpreter
        names = sorted(str(k) for k in recorder.functions)
        if not names:
            self.reply({"kind": "compiled", "ok": False, "kernel_names": [], "missing": [], "note": note,
                        "errors": ["no @triton.jit kernel was launched: the candidate must compute its result "
                                   "with its own Triton kernels"], "info": {}})
            return
        t1 = time.monotonic()
        required = tuple(msg.get("require_features", ()))
        report = compile_recorded(recorder, target=msg.get("target", "auto"), sass=bool(required))
        stage_s = {"compile.first_run": t1 - t0, "compile.gate": time.monotonic() - t1}
        missing = list(feature_check(report, required)) if report.ok else []
        info = _jsonable(report)
        info["features"] = sorted(str(f) for f in report.features())
        if msg.get("features_later") and self.interpreter:   # the feature gate's compile child, importing meanwhile
            from sandbox import compile as compile_gate
            compile_gate.start_spare()
        self.reply({"kind": "compiled", "ok": bool(report.ok), "errors": [str(e) for e in report.errors],
                    "kernel_names": names, "missing": missing, "note": note, "info": info, "stage_s": stage_s})

    def on_compile_ahead(self, msg: dict) -> None:
        """Compile the candidate's specializations for the shapes its next trials will run, in parallel
        (sandbox/compile_ahead.py). Best effort: the reply has counts and seconds, nothing that can fail."""
        from sandbox.compile_ahead import compile_ahead, to_meta
        t0 = time.monotonic()
        try:
            metas, on_cuda = [], False
            for shape in msg["shapes"]:     # one shape's real inputs at a time: only their metadata is kept
                real = self.make_inputs(shape["dims"], shape["dtype"], shape["seed"])
                on_cuda = on_cuda or any(isinstance(v, self.torch.Tensor) and v.is_cuda for v in real.values())
                metas.append({k: to_meta(v, self.torch) for k, v in real.items()})
                del real
            t_inputs = time.monotonic() - t0
            summary = compile_ahead(self.fn, metas, jobs=msg.get("jobs") or None, inputs_on_cuda=on_cuda)
            summary["inputs_s"] = t_inputs
        except Exception as e:  # noqa: BLE001 - best effort: the trials compile what is missing, as without it
            summary = {"specializations": 0, "notes": [f"compile ahead stopped: {type(e).__name__}"],
                       "inputs_s": time.monotonic() - t0}
        self.reply({"kind": "compiled_ahead", **summary})

    def on_check(self, msg: dict) -> None:
        """Trials of one shape: fresh values copied into the first trial's buffers each time. With `guard`,
        instead one call on read-only copies of seeds[0]'s values (sandbox/input_guard.py). With `fresh`,
        the previous check's buffers are still alive while these are allocated, so the addresses differ
        (the parent's evidence for a result cached by pointer)."""
        torch = self.torch
        if msg.get("seal"):
            self._seal_output()
        if msg.get("guard"):
            self._guarded_trial(msg)
            return
        held = self._held_buffers if msg.get("fresh") else None
        self._held_buffers = None      # only a `fresh` re-run keeps the previous buffers alive (memory)
        t0 = time.monotonic()
        inputs = self.make_inputs(msg["dims"], msg["dtype"], msg["seeds"][0])
        self._inputs_s = time.monotonic() - t0      # reported with the first trial (sub-stage times)
        buffers = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        fresh = None
        if held is not None:
            old = {v.untyped_storage().data_ptr() for v in held.values() if v.numel()}
            fresh = not any(v.untyped_storage().data_ptr() in old for v in buffers.values() if v.numel())
        for trial, seed in enumerate(msg["seeds"]):
            if trial:
                # Fresh values copied INTO the first trial's buffers: a cache keyed by pointer or shape goes stale.
                t0 = time.monotonic()
                for k, v in self.make_inputs(msg["dims"], msg["dtype"], seed).items():
                    if k in buffers:
                        buffers[k].copy_(v)
                    else:
                        inputs[k] = v
                self._inputs_s = time.monotonic() - t0
            self._trial(msg, trial, seed, inputs, {"fresh_buffers": fresh})
        del held
        self._held_buffers = buffers
        self.reply({"kind": "checked", "index": msg["index"]})

    def _guarded_trial(self, msg: dict) -> None:
        from sandbox.input_guard import GuardUnavailable, guarded_inputs
        plain = self.make_inputs(msg["dims"], msg["dtype"], msg["seeds"][0])
        try:
            guarded, how, note = *guarded_inputs(plain, writable=self.spec.mutates), None
        except GuardUnavailable as e:      # reported, never silent: the parent says the guard was off
            guarded, how, note = plain, "none", str(e)
        del plain
        self.sync()
        self._trial(msg, 0, msg["seeds"][0], guarded, {"guard": how, "guard_note": note})
        del guarded
        self.reply({"kind": "checked", "index": msg["index"]})

    def _trial(self, msg: dict, trial: int, seed: int, inputs: dict, extra: dict) -> None:
        """One call on `inputs`, its outputs (and the arguments it writes in place, MUTATES) checked here for
        type/layout/stream order and sent back (sandbox/results.py)."""
        from sandbox import results as rs
        from sandbox.correctness import input_digests, output_layout, poisoned_allocations, same_bytes, scrub_free_memory
        parts = [rs.Part(n, tuple(s), d) for n, s, d in msg["outputs"]]
        # Where this trial's seconds went, for the parent's sub-stages (`holdouts/worker.call`, ...): the
        # first call of a shape includes the compile of any specialization not in the cache.
        # worker.send: the previous trial's reply: its pipe write (which blocks while the parent is not reading),
        # and with the output slot the wait for the parent's read of it
        spent = {"worker.inputs": self._inputs_s, "worker.send": self._send_s}
        self._inputs_s = self._send_s = 0.0
        t0 = time.monotonic()
        self.sync()
        spent["worker.sync"] = time.monotonic() - t0
        # On the CPU (cheap there) also the digests before the call: a mismatch with the parent's then says the
        # two processes drew different inputs from the seed (aka's fault), not that the candidate wrote them.
        before = input_digests(inputs, seed) if self.device.type == "cpu" else None
        if msg.get("poison", True):
            with poisoned_allocations():
                t1 = time.monotonic()
                scrub_free_memory(rs.nbytes(parts), self.device)
                spent["worker.poison"] = time.monotonic() - t1
                t1 = time.monotonic()
                ret, snapshots = self._call_snapshot(inputs)
        else:   # the re-check after timing runs under timing's conditions: the candidate's state as it was
            t1 = time.monotonic()
            ret, snapshots = self._call_snapshot(inputs)
        spent["worker.call_first" if trial == 0 else "worker.call"] = time.monotonic() - t1
        t1 = time.monotonic()
        tensors, problem = rs.returned(ret, self.spec)
        if problem is None:
            problem = rs.outputs_problem(self.spec, tensors, parts, self.device.type, inputs, output_layout(self.spec))
        result = tensors + [inputs[m] for m in self.spec.mutates]
        if problem is None and snapshots is not None and not all(map(same_bytes, snapshots, result)):
            what = "output" if rs.single(self.spec) else "result (an output or an argument written in place)"
            problem = ("stream", f"the {what} changed after the call returned: work on a side stream was not "
                       "ordered with the caller's stream (a serving engine would read an unfinished result)")
        spent["worker.output_checks"] = time.monotonic() - t1
        t1 = time.monotonic()
        header = {"kind": "trial", "index": msg["index"], "trial": trial, "problem": problem and problem[1],
                  "problem_kind": problem and problem[0], "digests": input_digests(inputs, seed),
                  "digests_before": before, **extra}
        spent["worker.digests"] = time.monotonic() - t1
        t1 = time.monotonic()
        payload, in_slot = b"", None
        if problem is None:
            shown = snapshots if snapshots is not None else result
            header.update(rs.header_of(shown, parts + [rs.Part(m, (), "", True) for m in self.spec.mutates]))
            in_slot = self.slot.write(shown) if self.slot is not None else None
            if in_slot is None:
                payload = rs.pack(shown)
            else:
                header["payload_in_slot"] = in_slot
        spent["worker.pack"] = time.monotonic() - t1
        header["worker_s"] = {k: round(v, 6) for k, v in spent.items()}
        t1 = time.monotonic()
        self.reply(header, payload)
        if in_slot is not None:       # nothing runs (no candidate code, no next trial) until the parent has read it
            from sandbox.output_slot import SLOT_READ
            ack, _ = protocol.recv_blocking(self.rx)
            if ack.get("kind") != SLOT_READ:
                raise RuntimeError(f"expected the parent's {SLOT_READ!r} after an output in the slot, "
                                   f"got {ack.get('kind')!r}")
        self._send_s = time.monotonic() - t1

    def _call_snapshot(self, inputs: dict):
        """Call, then copy the outputs (and the mutated arguments) on the caller's stream BEFORE the device-wide
        sync: a result computed on an unsynchronized side stream is caught unfinished in the copy, as a consumer
        kernel would see it."""
        from sandbox.results import result_tensors
        torch = self.torch
        if self.device.type != "cuda":
            return self.call(self.prepare(inputs)), None
        stream = torch.cuda.current_stream()
        try:
            out = self.fn(**self.prepare(inputs))
            snapshots = None
            targets = result_tensors(out, self.spec, inputs)
            if targets and all(type(t) is torch.Tensor and t.device.type == "cuda" for t in targets):
                with torch.cuda.stream(stream):
                    snapshots = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in targets]
                    for snap, t in zip(snapshots, targets):
                        snap.copy_(t)
            torch.cuda.synchronize()
            torch.cuda.set_stream(stream)     # a candidate must not leave another stream current
            return out, snapshots
        except BaseException as e:  # noqa: BLE001
            raise _failure(e) from None

    def _seal_output(self) -> None:
        """From the hold-out shapes on, stdout/stderr go to a file the parent never reports: a candidate that
        prints the shapes it is called with cannot leak them to a proposer."""
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(self.sealed_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)

    def _wrapped(self):
        fn = self.fn

        def run(inputs: dict):
            try:
                return fn(**inputs)
            except BaseException as e:  # noqa: BLE001
                raise _failure(e) from None
        return run

    def on_dsl(self, msg: dict) -> None:
        from sandbox.timing import dsl_attribution
        inputs = self.make_inputs(msg["dims"], msg["dtype"], msg["seed"])
        attribution = dsl_attribution(self._wrapped(), inputs, set(msg["kernel_names"]))
        self.reply({"kind": "dsl", "attribution": attribution.to_json()})

    def on_launches(self, msg: dict) -> None:
        """The launch record of one visible shape (sandbox/launch_record.py): one extra, unchecked call."""
        from sandbox.feature_gate import shape_key
        from sandbox.launch_record import record_launches
        inputs = self.make_inputs(msg["dims"], msg["dtype"], msg["seed"])

        def keep(recorder) -> None:       # its records and compiled kernels, for a later `features` request
            self.launch_recorders[shape_key(msg["dims"], msg["dtype"])] = recorder
        record = record_launches(lambda: self.call(inputs), sys.modules.get(CANDIDATE_MODULE),
                                 lambda e: getattr(e, "fatal", False) or _is_cuda_or_oom(e), keep)
        self.reply({"kind": "launches", "record": record.to_json()})

    def on_floor(self, msg: dict) -> None:
        from benchmarks.gpu_timer import lesser_floor, take_hold_stats
        from sandbox.timing import measure_floor_parts
        parts = measure_floor_parts()
        self.reply({"kind": "floor", "t_floor_s": float(lesser_floor(parts)), "parts_s": parts,
                    "hold": take_hold_stats()})

    def on_time(self, msg: dict) -> None:
        from benchmarks.gpu_timer import take_hold_stats
        from sandbox.timing import time_call
        t0 = time.monotonic()
        self._held_buffers = None
        sets = [self.make_inputs(msg["dims"], msg["dtype"], msg["seeds"][0])]
        set_bytes = sum(v.numel() * v.element_size() for v in sets[0].values() if isinstance(v, self.torch.Tensor))
        wanted = min(len(msg["seeds"]), MAX_INPUT_SETS, max(1, MAX_INPUT_SET_BYTES // max(set_bytes, 1)))
        sets += [self.make_inputs(msg["dims"], msg["dtype"], s) for s in msg["seeds"][1:wanted]]
        kwargs = {k: msg[k] for k in ("reps", "warmup") if msg.get(k)}
        t_inputs = time.monotonic() - t0
        kept: dict = {}
        sets = [self.prepare(s) for s in sets]    # a library baseline's own input form (identity otherwise)
        res = time_call(self._wrapped(), sets, keep=kept, eager=bool(msg.get("eager", True)), **kwargs)
        header = {"kind": "timing", "t_graph_s": res.t_graph_s, "t_eager_s": res.t_eager_s,
                  "graph_error": res.graph_error, "samples": res.samples, "input_sets": len(sets),
                  "stage_s": {"timing.inputs": t_inputs, **dict(res.stage_s)}, "hold": take_hold_stats()}
        payload = b""
        if msg.get("replay_seed") is not None:
            from sandbox import results as rs
            from sandbox.timing import replay_on_fresh_inputs
            t1 = time.monotonic()
            fresh = self.make_inputs(msg["dims"], msg["dtype"], msg["replay_seed"])
            names = self.spec.output_names
            out, why = replay_on_fresh_inputs(kept, sets, fresh, mutates=self.spec.mutates,
                                              n_outputs=None if names is None else len(names))
            header["replay"] = {"checked": out is not None, "note": why, "calls": kept.get("calls_on_set", 1)}
            if out is not None:
                shown = list(("out",) if names is None else names) + list(self.spec.mutates)
                header["replay"].update(rs.header_of(out, [rs.Part(n, (), "") for n in shown]))
                payload = rs.pack(out)
            header["stage_s"]["timing.replay_check"] = time.monotonic() - t1
        kept.clear()
        self.reply(header, payload)

    def on_counters(self, msg: dict) -> None:
        from sandbox.counters import collect
        if self.candidate_path is None:
            record = {"available": False, "reason": "baselines are not profiled with counters"}
        else:
            rec = collect(self.candidate_path, msg["op"], msg["dims_list"], msg["dtype"], float(msg["timeout_s"]))
            record = rec.to_json()
        self.reply({"kind": "counters", "record": record})

    def on_features(self, msg: dict) -> None:
        from sandbox.feature_gate import on_features
        on_features(self, msg)

    def on_ab_time(self, msg: dict) -> None:
        from sandbox.ab import on_ab_time
        on_ab_time(self, msg)

    # ---- main loop -------------------------------------------------------------------------------
    def serve(self, warm_cuda: bool = False, warm_stages=WARM_STAGES) -> None:
        t0 = time.monotonic()
        import torch
        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False   # baselines time the same fp32 math the parent checks
        torch.backends.cudnn.allow_tf32 = False
        hello = {"kind": "ready", "pid": os.getpid(), "torch": torch.__version__, "cuda": torch.cuda.is_available(),
                 "loopback": self.loopback}
        try:
            import triton
            hello["triton"] = triton.__version__
            if os.environ.get("TRITON_INTERPRET") == "1":
                from sandbox import interpreter_compat
                interpreter_compat.apply()      # Triton 3.6's loop bounds under a recent NumPy
        except Exception as e:  # noqa: BLE001 - reported, the parent decides
            hello["triton_error"] = f"{type(e).__name__}: {e}"
        stage_s = {"imports": time.monotonic() - t0}
        if warm_cuda and torch.cuda.is_available():
            stage_s.update(warm_gpu(torch, warm_stages))
        hello["stage_s"] = stage_s
        self.device = torch.device("cpu")
        self.reply(hello)
        handlers = {"setup": self.on_setup, "compile": self.on_compile, "check": self.on_check, "dsl": self.on_dsl,
                    "floor": self.on_floor, "time": self.on_time, "counters": self.on_counters,
                    "ab_time": self.on_ab_time, "launches": self.on_launches, "compile_ahead": self.on_compile_ahead,
                    "features": self.on_features}
        while True:
            try:
                msg, _ = protocol.recv_blocking(self.rx)
            except EOFError:
                os._exit(0)
            kind = msg["kind"]
            if kind == "quit":
                os._exit(0)
            try:
                handlers[kind](msg)
            except CandidateFailure as e:
                self.reply({"kind": "error", "error": e.message, "fatal": e.fatal, "exc_type": e.exc_type})
                os._exit(0)
            except BaseException as e:  # noqa: BLE001
                if _is_cuda_or_oom(e):   # sticky CUDA errors surface in whatever runs next: the candidate's doing
                    self.reply({"kind": "error", "error": describe_exception(e), "fatal": True,
                                "exc_type": type(e).__name__})
                else:
                    self.reply({"kind": "harness_error", "request": kind, "traceback": traceback.format_exc()[-6000:]})
                os._exit(0)


def warm_gpu(torch, stages=WARM_STAGES) -> dict[str, float]:
    """A pre-started worker's GPU start-up, before the parent has a candidate for it: the CUDA context, CUPTI
    and the input digests' kernel (`stages`, in that order; the context always); seconds per stage. Each stage
    holds the GPU's lock (benchmarks/gpu_lock.py, off unless AKA_GPU_LOCK is set): it runs while another worker
    times its kernels, and session 38's floor study found such start-ups inside their intervals."""
    from benchmarks import gpu_lock
    from sandbox.digest_kernel import warm
    unknown = set(stages) - set(WARM_STAGES)
    if unknown:
        raise ValueError(f"warm_gpu stages {sorted(unknown)}: not among {WARM_STAGES}")
    runs = {"cuda_init": lambda: (torch.cuda.set_device(0), torch.zeros(1, device="cuda"),
                                  torch.cuda.synchronize()),
            "profiler_init": lambda: _warm_profiler(torch),
            "digest_compile": warm}
    stage_s = {}
    for name in WARM_STAGES:
        if name in stages or name == "cuda_init":
            t1 = time.monotonic()
            with gpu_lock.exclusive():
                runs[name]()
            stage_s[name] = time.monotonic() - t1
    return stage_s


def _warm_profiler(torch) -> None:
    """Start CUPTI once, in a worker that has run no candidate code: the first torch.profiler session of a
    process took 5.4 s on the H200 (later ones 1 ms), and the attribution gate profiles every candidate.
    A pre-started worker pays it while the previous evaluation runs."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.zeros(1, device="cuda").add_(1)
        torch.cuda.synchronize()


def _jsonable(obj):
    import dataclasses
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in obj]
        return sorted(items, key=str) if isinstance(obj, (set, frozenset)) else items
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def _apply_limits(file_size: int, address_space: int | None) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))                 # no core dumps of crashing candidates
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)                    # a flood then fails with EFBIG, visibly
    if address_space:   # interpreter only: CUDA reserves far more address space than it uses
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))


def _bring_loopback_up() -> str:
    """In a fresh network namespace even 127.0.0.1 is down; tools that talk to themselves over loopback
    (Nsight Compute, compile worker pools) need it. The namespace's loopback reaches nothing outside."""
    import fcntl
    import socket
    import struct
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16sH14s", b"lo", 0, bytes(14))
            flags = struct.unpack("16sH14s", fcntl.ioctl(s, siocgifflags, req))[1]
            fcntl.ioctl(s, siocsifflags, struct.pack("16sH14s", b"lo", flags | iff_up, bytes(14)))
        return "up"
    except OSError as e:
        return f"down ({e})"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="aka sandbox worker (started by sandbox.isolation)")
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--replies", type=int, required=True)
    ap.add_argument("--file-size-limit", type=int, required=True)
    ap.add_argument("--address-space-limit", type=int, default=None)
    ap.add_argument("--warm-cuda", action="store_true", help="create the CUDA context before the first request")
    ap.add_argument("--warm-stages", default=",".join(WARM_STAGES),
                    help=f"with --warm-cuda: warm_gpu's stages, comma-separated (default {','.join(WARM_STAGES)}; "
                         f"'' the context only)")
    ap.add_argument("--loopback-up", action="store_true", help="bring up lo (only inside a new network namespace)")
    args = ap.parse_args(argv)
    _apply_limits(args.file_size_limit, args.address_space_limit)
    if os.environ.get("TRITON_INTERPRET") == "1":
        # The interpreter cannot compile in-process: its compile gate needs a child, whose imports now run
        # beside this worker's own (compile gate 1.7-2.0 s -> 0.8-1.1 s on 2 cores). It inherits the limits.
        from sandbox import compile as compile_gate
        compile_gate.start_spare()
    worker = Worker(args.requests, args.replies)
    worker.loopback = _bring_loopback_up() if args.loopback_up else None
    worker.serve(warm_cuda=args.warm_cuda, warm_stages=tuple(s for s in args.warm_stages.split(",") if s))


if __name__ == "__main__":
    main()
