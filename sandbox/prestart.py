"""Pre-started workers: the next evaluation's process is spawned while the current one runs.

A worker spends seconds before it can take a request: Python start-up, `import torch, triton`, and on a
GPU the CUDA context. A `WorkerPool` keeps spare workers per kind (interpreter or GPU, network
namespace or not) and starts a new one as soon as it hands one out, so that cost overlaps the current
evaluation instead of adding to the next. A GPU worker's start (imports, CUDA context, the profiler's
CUPTI start-up) took 8-10 s on the H200, far longer than a timing-only screen (1.1-1.5 s), so GPU workers
keep `gpu_spares` ready (four by default: with two, a silu_and_mul run waited 103 of its 235 evaluation
seconds for a worker); interpreter workers keep one, because on a small CPU host more spares would take
the cores the interpreter runs on. Trust is unchanged: a spare has run no candidate
code (it has only imported torch and triton and, on a GPU, created its context); every evaluation still
takes a fresh process and kills it at the end; a spare that died while waiting is replaced, never reused.

The spare's start-up competes for host CPU with the current evaluation for a few seconds; device timing
is read from CUDA events inside graph replays, so host load does not enter the scored time.
"""
from __future__ import annotations

from sandbox.isolation import WorkerProcess


class WorkerPool:
    def __init__(self, *, prestart: bool = True, gpu_spares: int = 4, fork_server: bool = True,
                 gpu_warm_stages: tuple[str, ...] | None = None):
        if gpu_spares < 1:
            raise ValueError(f"gpu_spares={gpu_spares}: at least 1 (turn pre-starting off with prestart=False)")
        self.prestart, self.gpu_spares, self.fork_server = prestart, gpu_spares, fork_server
        self.gpu_warm_stages = gpu_warm_stages      # a GPU worker's start-up stages (None: warm_gpu's default)
        self._spares: dict[tuple[bool, bool], list[WorkerProcess]] = {}
        self.started = 0           # workers spawned (for tests and the stage breakdown)

    def _spawn(self, interpreter: bool, network_namespace: bool, timeout_s: float) -> WorkerProcess:
        self.started += 1
        return WorkerProcess(interpreter=interpreter, timeout_s=timeout_s, network_namespace=network_namespace,
                             warm_cuda=not interpreter, warm_stages=self.gpu_warm_stages,
                             fork_server=self.fork_server).start()

    def take(self, *, interpreter: bool, timeout_s: float, network_namespace: bool = True
             ) -> tuple[WorkerProcess, bool]:
        """(a started worker armed with `timeout_s`, whether it was pre-started); starts the next spare."""
        key = (bool(interpreter), bool(network_namespace))
        spares = self._spares.setdefault(key, [])
        worker = None
        while spares and worker is None:      # the oldest first: it has had the longest to get ready
            worker = spares.pop(0)
            if not worker.alive():
                worker.close()
                worker = None
        prestarted = worker is not None
        if worker is None:
            worker = self._spawn(interpreter, network_namespace, timeout_s)
        worker.arm(timeout_s)
        if self.prestart:
            want = 1 if interpreter else self.gpu_spares
            try:
                while len(spares) < want:
                    spares.append(self._spawn(interpreter, network_namespace, timeout_s))
            except OSError:
                pass   # fewer spares this time; the next take spawns what is missing
        return worker, prestarted

    def close(self) -> None:
        """Kill every spare (they never ran candidate code; nothing is lost)."""
        for spares in self._spares.values():
            for worker in spares:
                worker.close()
        self._spares.clear()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
