"""One conversation with one fresh worker: start (or take a pre-started one), set up, exchange requests,
turn every way the worker can fail into a rejection at the gate in flight, and time each stage.

Shared by the full evaluation (sandbox/evaluation.py, sandbox/gpu_gates.py) and the A/B re-measure
(sandbox/ab.py): the gates ask for values; this module owns the pipe, the deadline and the stage clock.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from sandbox.compile_cache import CompileCache
from sandbox.correctness import HarnessError, Rejected
from sandbox.isolation import WorkerFailure, WorkerProcess
from sandbox.prestart import WorkerPool
from sandbox.settings import SandboxSettings
from sandbox.stage_times import StageClock


class Conversation:
    """Base of the parent's side of an evaluation. Subclasses set `result`, `interpreter`, `device`,
    `settings`, `op`, `operator_dir` and call `_in_worker(body, sources)`."""

    result = None
    settings: SandboxSettings
    pool: WorkerPool | None = None
    cache: CompileCache | None = None
    slot = None                              # sandbox.output_slot.OutputSlot of the worker in use, if any

    def _init_conversation(self) -> None:
        self.clock = StageClock()
        self.stage: str | None = None        # the gate whose request is in flight
        self.activity = "starting the worker"
        self.in_holdout = False
        self.fault_rule: str | None = None   # set while a fault would break a named rule (the read-only-input call)

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        with self.clock.stage(name):
            yield

    def _take_worker(self) -> tuple[WorkerProcess, bool]:
        s = self.settings
        if self.pool is not None:
            return self.pool.take(interpreter=self.interpreter, timeout_s=s.timeout_s,
                                  network_namespace=s.network_namespace)
        w = WorkerProcess(interpreter=self.interpreter, timeout_s=s.timeout_s, network_namespace=s.network_namespace,
                          fork_server=s.fork_server)
        return w.start(), False

    def _in_worker(self, body: Callable[[WorkerProcess], None], setup: dict) -> None:
        """Run `body(worker)` in a fresh worker; its failures become rejections at the gate in flight."""
        res = self.result
        self.stage, self.in_holdout = None, False      # a worker that dies before loading is our bug
        t0 = time.monotonic()
        w, prestarted = self._take_worker()
        res.environment.update(network_namespace=w.network_namespace, network_namespace_note=w.network_note,
                               worker_prestarted=prestarted, worker_started_by=w.started_by)
        self.slot = None
        if self.settings.output_slot:
            from sandbox.output_slot import OutputSlot
            self.slot = OutputSlot()
        try:
            try:
                self._open(w, setup, t0, prestarted)
                body(w)
                with self._timed("teardown"):
                    w.finish()
            except WorkerFailure as e:
                if self.stage is None:
                    raise HarnessError(f"the worker failed before the candidate was loaded: {e.reason}\n"
                                       f"stderr:\n{w.stderr_tail()}") from None
                where = "a hidden hold-out shape" if self.in_holdout else self.activity
                rule = getattr(self, "fault_rule", None)   # set while a fault breaks a named rule (read-only inputs)
                raise Rejected(self.stage, f"{rule} ({e.reason}, during {where})" if rule
                               else f"{e.reason}, during {where}") from None
            finally:
                if not res.stdout_tail and not res.stderr_tail:
                    res.stdout_tail, res.stderr_tail = w.stdout_tail(), w.stderr_tail()
        finally:
            with self._timed("teardown"):
                w.close()
                if self.slot is not None:
                    self.slot.close()

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
            rule = getattr(self, "fault_rule", None)
            if rule:
                message = f"{rule} ({message}"
                where += ")"
            from sandbox.trial_evidence import interpreter_limitation
            limitation = interpreter_limitation(getattr(self.req, "source", ""), str(header.get("exc_type") or ""),
                                                self.interpreter)
            if limitation:
                self.result.interpreter_limitation = limitation
                message = f"{limitation}. The interpreter said: {message}"
            raise Rejected(self.stage or "compile", f"{message} (during {where})")
        if got != kind:
            raise Rejected(self.stage or "compile", f"protocol violation on the private result pipe: expected "
                                                     f"a {kind!r} reply, got {got!r}")
        return header, payload

    def _expect_trial(self, w: WorkerProcess, nbytes: int):
        """A trial's header and its output bytes, from the pipe or from the output slot (sandbox/output_slot.py),
        which is then acknowledged so the worker may go on."""
        header, payload = self._expect(w, "trial", max_payload=max(int(nbytes), 1))
        n = header.get("payload_in_slot")
        if n is None:
            return header, payload
        slot = self.slot
        if slot is None or type(n) is not int or len(payload):
            raise Rejected(self.stage or "compile", "protocol violation on the private result pipe: a trial's "
                                                     "output announced in an output slot this evaluation did not offer")
        got = slot.read(n, self.device)
        from sandbox.output_slot import SLOT_READ
        w.send({"kind": SLOT_READ})
        env = self.result.environment
        env["output_slot_trials"] = env.get("output_slot_trials", 0) + 1    # how many outputs took the slot
        if isinstance(got, str):
            raise Rejected(self.stage or "compile", f"protocol violation on the output slot: {got}")
        return header, got

    def _open(self, w: WorkerProcess, setup: dict, t0: float, prestarted: bool) -> None:
        """Read the worker's hello, write the candidate file(s), send setup, wait for "loaded"."""
        hello, _ = self._expect(w, "ready")
        now = time.monotonic()
        worker_s = {k: float(v) for k, v in (hello.get("stage_s") or {}).items()}
        if prestarted:
            self.clock.add("worker_wait", now - t0)     # the spare's start-up overlapped the last evaluation
        else:
            self.clock.add("worker_start", max(0.0, now - t0 - sum(worker_s.values())))
            self.clock.merge(worker_s)
        if "triton_error" in hello and setup.get("candidate_sources"):
            raise HarnessError(f"triton does not import in the worker: {hello['triton_error']}")
        self.result.environment.update(worker_torch=hello.get("torch"), worker_triton=hello.get("triton"),
                                       worker_loopback=hello.get("loopback"))
        self.stage, self.activity = "compile", "loading the candidate"
        t_setup = time.monotonic()
        w.send(self._setup_message(w, setup))
        loaded, _ = self._expect(w, "loaded")
        in_worker = self.clock.merge(loaded.get("stage_s"))       # cuda_init, when the worker was not warm
        self.clock.add("setup", max(0.0, time.monotonic() - t_setup - in_worker))
        self.result.environment["device_name"] = loaded.get("device_name")

    def _setup_message(self, w: WorkerProcess, setup: dict) -> dict:
        """The setup request: candidate files written into the worker's fresh directory, the compile cache
        directory of the (first) source, and the sandbox settings the worker applies."""
        sources = list(setup.get("candidate_sources") or [])
        paths = []
        for i, text in enumerate(sources):
            folder = w.workdir if i == 0 else w.workdir / f"other{i}"
            folder.mkdir(exist_ok=True)
            path = folder / "candidate.py"          # tracebacks name candidate.py whichever kernel it is
            path.write_text(text)
            paths.append(str(path))
        cache_dir = ab_cache_dir = None
        req = getattr(self, "req", None)
        if getattr(req, "private_compile", False):
            self.result.environment["compile_cache"] = "private: compiled from this source alone"
        elif self.cache is not None and sources and self.settings.compile_cache:
            seed_from = getattr(req, "compile_cache_from", None) if len(sources) == 1 else None
            folder, note = self.cache.checkout(sources[0], seed_from=seed_from)
            cache_dir = str(folder)
            self.result.environment["compile_cache"] = note
            if len(sources) > 1:
                # An A/B: each kernel compiles from, and loads, its own source's sealed directory only (the
                # worker switches TRITON_CACHE_DIR around each kernel's calls, sandbox/ab.py), so both find
                # what their own evaluations compiled and neither reaches binaries of the other's source.
                # (One directory for the pair, as before, started empty: every specialization of both
                # kernels compiled inside the timed A/B, 20-39 s of fused_moe's on the H200.)
                other, other_note = self.cache.checkout(sources[1])
                ab_cache_dir = str(other)
                self.result.environment["compile_cache_b"] = other_note
        return {"kind": "setup", "op": self.op, "operator_dir": self.operator_dir, "device": self.device,
                "interpreter": self.interpreter, "memory_fraction": self.settings.gpu_memory_fraction,
                "baseline": setup.get("baseline"), "candidate_path": paths[0] if paths else None,
                "ab_path": paths[1] if len(paths) > 1 else None, "sealed_path": str(w.sealed_path),
                "cache_dir": cache_dir, "ab_cache_dir": ab_cache_dir,
                "compile_in_worker": self.settings.compile_in_worker,
                "output_slot": self.slot.path if self.slot is not None else None}
