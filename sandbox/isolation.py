"""Start one worker per evaluation and turn every way it can end badly into a reason string.

The worker is `python -m sandbox.worker` in its own session (so its own process group), with a fresh
working directory, a scrubbed environment, stdout/stderr going to files (read back as ~4 KB tails), no
network where `unshare -n` works, and results coming back over a private pipe. An interpreter worker is
forked by a fork server that has imported torch (sandbox/zygote.py: the same isolation, without 2.4 s of
start-up CPU, twice, per evaluation); where that fails it is spawned. A wall-clock deadline
covers the whole evaluation; past it the whole process group is killed (grandchildren too). Nothing here
imports torch: the parent's GPU work lives in sandbox/evaluation.py.
"""
from __future__ import annotations

import fcntl
import functools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sandbox import protocol, zygote_client

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TAIL_BYTES = 4096
FILE_SIZE_LIMIT = 256 << 20          # stdout/stderr/cache files a worker may write: bounds a print flood
INTERPRETER_ADDRESS_SPACE = 8 << 30  # torch + triton + the interpreter stay under 1.5 GiB of address space
EXIT_GRACE_S = 5.0

# Only these variables reach the worker: the parent's environment may hold API keys, and a candidate
# has no business seeing them (with no network it could not send them, but it could print them).
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LD_LIBRARY_PATH", "TMPDIR", "CUDA_HOME", "CUDA_PATH",
             "TRITON_CACHE_DIR", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH",
             "TRITON_LIBCUDA_PATH", "TORCHINDUCTOR_CACHE_DIR",
             "AKA_GPU_LOCK")    # the GPU's lock: on, its file's path, or off (benchmarks/gpu_lock.py)
_ENV_KEEP_PREFIXES = ("CUDA_VISIBLE", "CUDA_DEVICE", "NVIDIA_")

_SIGNAL_HINTS = {
    signal.SIGKILL: "killed from outside, or by the kernel's OOM killer (out of host memory?)",
    signal.SIGSEGV: "segmentation fault: an out-of-bounds access in a kernel or launcher?",
    signal.SIGBUS: "bus error: an invalid memory access?",
    signal.SIGABRT: "aborted: a fatal CUDA or C++ error?",
    signal.SIGFPE: "arithmetic exception",
    signal.SIGXFSZ: f"wrote past the {FILE_SIZE_LIMIT >> 20} MiB file size limit: an stdout/stderr flood?",
    signal.SIGXCPU: "CPU time limit exceeded",
}


class WorkerFailure(Exception):
    """The worker timed out, died, or broke the protocol. `reason` is the one-line cause for the verdict."""

    def __init__(self, reason: str, kind: str):
        super().__init__(reason)
        self.reason, self.kind = reason, kind     # kind: "timeout" | "died" | "protocol"


@functools.lru_cache(maxsize=1)
def network_namespace_support() -> tuple[bool, str]:
    """(works, why): probe `unshare -n` once per process and cache the answer."""
    if not sys.platform.startswith("linux"):
        return False, f"network namespaces need Linux; this is {sys.platform}"
    exe = shutil.which("unshare")
    if exe is None:
        return False, "unshare(1) is not on PATH (util-linux); the worker keeps the host network"
    try:
        probe = subprocess.run([exe, "-n", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"`unshare -n true` could not run: {e}"
    if probe.returncode != 0:
        return False, (f"`unshare -n true` failed with code {probe.returncode}: {probe.stderr.strip()[:300]} "
                       f"(needs root or unprivileged user namespaces); the worker keeps the host network")
    return True, "worker runs in a new network namespace (unshare -n): no network but its own loopback"


def tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of a file as text, saying how much was cut."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size > limit:
                f.seek(size - limit)
            data = f.read(limit)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return f"[... {size - limit} earlier bytes truncated ...]\n{text}" if size > limit else text


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = _SIGNAL_HINTS.get(sig)
        return f"worker killed by signal {name}" + (f" ({hint})" if hint else "")
    if returncode == 0:
        return "worker exited with code 0 before reporting (os._exit? sys.exit? exiting the process is not allowed)"
    return f"worker exited with code {returncode} before reporting"


def worker_environment(*, interpreter: bool, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP or k.startswith(_ENV_KEEP_PREFIXES)}
    env.setdefault("TRITON_CACHE_DIR", str(Path.home() / ".triton" / "cache"))  # keep compiles cached across workers
    env.update(HOME=str(home), PYTHONPATH=str(PROJECT_ROOT), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONNOUSERSITE="1", PYTHONHASHSEED="0")
    if interpreter:
        env["TRITON_INTERPRET"] = "1"          # must be set before triton is imported: so, before the process starts
        env["CUDA_VISIBLE_DEVICES"] = ""       # interpreter mode never touches a GPU
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


class WorkerProcess:
    """One spawned worker. Use as a context manager: leaving kills its process group and deletes its files."""

    def __init__(self, *, interpreter: bool, timeout_s: float, network_namespace: bool = True,
                 warm_cuda: bool = False, warm_stages: tuple[str, ...] | None = None, fork_server: bool = True):
        self.interpreter = interpreter
        self.fork_server = fork_server and interpreter      # GPU workers are spawned (and pre-started)
        self.started_by = "not started"
        self.warm_cuda = warm_cuda and not interpreter   # create the CUDA context before any request
        self.warm_stages = warm_stages                   # with warm_cuda: warm_gpu's stages (None: all of them)
        self.started_at = float("nan")
        self.timeout_s = float(timeout_s)
        self.tmp = Path(tempfile.mkdtemp(prefix="aka-eval-"))
        self.workdir = self.tmp / "work"            # the worker's cwd: a fresh, empty directory
        self.logdir = self.tmp / "logs"             # parent-owned: stdout/stderr and the sealed log
        self.home = self.tmp / "home"
        for d in (self.workdir, self.logdir, self.home):
            d.mkdir()
        self.stdout_path = self.logdir / "stdout.txt"
        self.stderr_path = self.logdir / "stderr.txt"
        self.sealed_path = self.logdir / "sealed.txt"   # output after hold-out shapes begin: never reported
        ok, why = network_namespace_support() if network_namespace else (False, "disabled by the request")
        self.network_namespace, self.network_note = ok, why
        self.proc: subprocess.Popen | zygote_client.ForkedProcess | None = None
        self.deadline = float("inf")
        self._frames = protocol.FrameBuffer()
        self._req_w = self._rep_r = -1
        self._eof = False

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "WorkerProcess":
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        for fd in (self._req_w, rep_w):
            try:   # 1 MiB pipes: fewer wake-ups when an output tensor comes back
                fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)   # Linux; harmless to skip
            except OSError:
                pass
        os.set_blocking(self._rep_r, False)
        args = ["--file-size-limit", str(FILE_SIZE_LIMIT)]
        if self.interpreter:
            args += ["--address-space-limit", str(INTERPRETER_ADDRESS_SPACE)]
        if self.warm_cuda:
            args += ["--warm-cuda"]
            if self.warm_stages is not None:
                args += ["--warm-stages", ",".join(self.warm_stages)]
        if self.network_namespace:
            args += ["--loopback-up"]
        env = worker_environment(interpreter=self.interpreter, home=self.home)
        try:
            with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
                self.proc = self._forked(args, env, out, err, req_r, rep_w) if self.fork_server else None
                if self.proc is None:
                    cmd = [sys.executable, "-m", "sandbox.worker", "--requests", str(req_r), "--replies", str(rep_w)]
                    if self.network_namespace:   # unshare execs the worker: the same pid
                        cmd = [shutil.which("unshare") or "unshare", "-n"] + cmd
                    self.proc = subprocess.Popen(cmd + args, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                                                 stdout=out, stderr=err, pass_fds=(req_r, rep_w),
                                                 start_new_session=True)
                    self.started_by = "spawned" + (f" ({self.started_by})" if self.fork_server else "")
        except BaseException:
            self.close()
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)
        self.started_at = time.monotonic()
        self.deadline = self.started_at + self.timeout_s
        return self

    def _forked(self, args, env, out, err, req_r: int, rep_w: int):
        """The worker forked by this process's zygote (sandbox/zygote.py), or None (self.started_by says why)."""
        try:
            proc = zygote_client.zygote_for(env).fork(
                module="sandbox.worker", args=["--requests", "{fd0}", "--replies", "{fd1}"] + args, cwd=self.workdir,
                env=env, stdout_fd=out.fileno(), stderr_fd=err.fileno(), pass_fds=(req_r, rep_w),
                netns=self.network_namespace)
        except zygote_client.ZygoteError as e:
            self.started_by = f"the fork server could not fork it: {e}"
            return None
        self.started_by = "forked by the fork server"
        if self.network_namespace:
            self.network_note = ("worker runs in a new network namespace (unshare(CLONE_NEWNET) after the fork "
                                 "server's fork): no network but its own loopback")
        return proc

    def arm(self, timeout_s: float) -> "WorkerProcess":
        """A pre-started worker taken for an evaluation: its deadline counts from now."""
        self.timeout_s = float(timeout_s)
        self.deadline = time.monotonic() + self.timeout_s
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self._eof

    def __enter__(self) -> "WorkerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def kill_group(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # start_new_session: pgid == the worker's pid
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            pass

    def finish(self) -> None:
        """Ask an idle worker to exit (it answers nothing); `close` still kills whatever is left."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                protocol.send(self._req_w, {"kind": "quit"})
                self.proc.wait(timeout=EXIT_GRACE_S)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def close(self) -> None:
        """Kill the whole process group (stragglers included) and remove every file."""
        self.kill_group()
        for fd in (self._req_w, self._rep_r):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req_w = self._rep_r = -1
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- messages --------------------------------------------------------------------------------
    def send(self, header: dict[str, Any]) -> None:
        try:
            protocol.send(self._req_w, header)
        except BrokenPipeError:
            raise self._died() from None

    def recv(self, max_payload: int = protocol.DEFAULT_MAX_PAYLOAD) -> tuple[dict[str, Any], bytes]:
        """The next frame from the worker. Raises WorkerFailure on timeout, death or garbage."""
        while True:
            try:
                frame = self._frames.take(max_payload)
            except protocol.ProtocolError as e:
                self.kill_group()
                raise WorkerFailure(f"protocol violation on the private result pipe: {e}", "protocol") from None
            if frame is not None:
                return frame
            if self._eof:
                raise self._died()
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.kill_group()
                raise WorkerFailure(f"timed out after {self.timeout_s:g} s (whole process group killed)", "timeout")
            ready, _, _ = select.select([self._rep_r], [], [], min(remaining, 0.25))
            if ready:
                self._drain()
            elif self.proc.poll() is not None:
                # Exited, but no EOF: a grandchild may still hold the pipe. Take what is there, then give up.
                self._drain()
                self._eof = True

    def _drain(self, budget: int = 64 << 20) -> None:
        """Move what the pipe holds now (up to `budget` bytes) into the frame buffer; note EOF."""
        got = 0
        while got < budget:
            sink = self._frames.sink()     # a payload in progress: read the pipe straight into its buffer
            try:
                if sink is not None:
                    n = os.readv(self._rep_r, [sink])
                    self._frames.advance(n)
                else:
                    chunk = os.read(self._rep_r, 1 << 20)
                    n = len(chunk)
                    self._frames.feed(chunk)
            except BlockingIOError:
                return
            if not n:
                self._eof = True
                return
            got += n

    def _died(self) -> WorkerFailure:
        rc = None
        if self.proc is not None:
            try:
                rc = self.proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                self.kill_group()
                return WorkerFailure("worker closed its result pipe without exiting (whole process group killed)",
                                     "died")
        self.kill_group()   # a dead worker may leave children behind
        reason = describe_exit(rc if rc is not None else -signal.SIGKILL)
        cuda_line = next((ln.strip() for ln in reversed(tail(self.stderr_path).splitlines())
                          if "CUDA error" in ln or "illegal memory access" in ln), None)
        if cuda_line:
            reason += f"; stderr says: {cuda_line[:300]}"
        return WorkerFailure(reason, "died")

    # ---- report ----------------------------------------------------------------------------------
    def stdout_tail(self) -> str:
        return tail(self.stdout_path)

    def stderr_tail(self) -> str:
        return tail(self.stderr_path)


# ---- what ran the evaluation -----------------------------------------------------------------------
def host_environment(interpreter: bool) -> dict[str, Any]:
    """GPU name, driver and clocks (nvidia-ml-py), torch/triton versions, interpreter flag."""
    import importlib.metadata
    import platform
    env: dict[str, Any] = {"interpreter": interpreter, "python": platform.python_version()}
    for pkg in ("torch", "triton"):
        try:
            env[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            env[pkg] = None
    env.update(gpu_environment(None if interpreter else 0))
    if interpreter:
        env["note"] = ("Triton interpreter on the CPU: shapes scaled down with interpreter_dims, fp32 inputs; "
                       "correctness is real, there is no timing (interpreter timings are not scores)")
    return env


def gpu_environment(torch_device: int | None = 0) -> dict[str, Any]:
    """The GPU the worker uses, as NVML names it; {"gpu": "no GPU"} where there is no driver."""
    try:
        import pynvml
    except ImportError as e:
        return {"gpu": "no GPU", "nvml_error": f"nvidia-ml-py is not installed ({e})"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return {"gpu": "no GPU", "nvml_error": str(e)}
    try:
        handle = _nvml_handle(pynvml, torch_device)
        text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731 - older bindings return bytes
        clock = pynvml.nvmlDeviceGetClockInfo
        max_clock = pynvml.nvmlDeviceGetMaxClockInfo
        return {"gpu": text(pynvml.nvmlDeviceGetName(handle)), "driver": text(pynvml.nvmlSystemGetDriverVersion()),
                "clocks_mhz": {"sm": clock(handle, pynvml.NVML_CLOCK_SM), "mem": clock(handle, pynvml.NVML_CLOCK_MEM),
                               "sm_max": max_clock(handle, pynvml.NVML_CLOCK_SM),
                               "mem_max": max_clock(handle, pynvml.NVML_CLOCK_MEM)}}
    except pynvml.NVMLError as e:
        return {"gpu": "unknown", "nvml_error": str(e)}
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _nvml_handle(pynvml, torch_device: int | None):
    """NVML numbers GPUs physically; torch's device 0 is the first of CUDA_VISIBLE_DEVICES. Match by UUID."""
    if torch_device is not None:
        try:
            import torch
            uuid = str(torch.cuda.get_device_properties(torch_device).uuid)
            for candidate in (uuid, f"GPU-{uuid}"):
                try:
                    return pynvml.nvmlDeviceGetHandleByUUID(candidate)
                except pynvml.NVMLError:
                    continue
        except Exception:  # noqa: BLE001 - fall back to the first device NVML lists
            pass
    return pynvml.nvmlDeviceGetHandleByIndex(0)
