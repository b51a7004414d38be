"""The fork server ("zygote") of interpreter workers: `python -m sandbox.zygote --control FD`.

Why: every evaluation takes a fresh worker process, and a fresh Python that imports torch spends about
2.4 s of CPU before it can take a request; the interpreter worker then starts a compile child that pays
it again. On the 2-core CI host that start-up was most of the CPU of the sandbox, corpus and loop tests
(one corpus evaluation: 4.7 s of imports against 0.1 s of correctness trials). This process imports torch
once and forks each worker from itself, so a worker starts with torch already loaded.

Trust is what it was with a spawned worker (sandbox/isolation.py):
- The zygote runs no candidate code and keeps no state a worker can reach: it imports torch and the
  sandbox's own modules, and never triton (a worker's TRITON_INTERPRET and its compile child's real
  Triton are both decided after the fork, as at a fresh start).
- Each worker is a fresh fork: a new session (its own process group, killed whole at the deadline), its
  own network namespace (unshare(CLONE_NEWNET) after the fork, where the probe at start-up shows it
  works), the evaluation's working directory and environment, stdin from /dev/null, stdout and stderr to
  the parent's files, and no file descriptor but those and its two private pipes.
- A candidate that could reach this process (signals, ptrace as the same user) could as well reach the
  parent, which holds far more; the lint stops both.

Protocol, on an AF_UNIX SOCK_SEQPACKET socket (one datagram per message): the zygote sends
{"kind": "ready", ...} once its imports are done; each request is a JSON datagram
{"module", "args", "cwd", "env", "netns"} carrying file descriptors (stdout, stderr, the worker's pipes,
then a status pipe's write end), answered by {"kind": "forked"} or {"kind": "error", "error"}. Each
worker has a reaper: a process forked from the zygote that forks the worker, writes "<pid>\n" to the
status pipe once the worker leads its own session (so that killpg(pid) reaches it, as after Popen with
start_new_session), waits for it, and writes "<exit code>\n" (negative: the signal), as Popen's
returncode. The parent cannot wait for a process that is not its child; the reaper is its stand-in. Args
that read "{fd<N>}" become the number of the N-th passed descriptor (after stdout and stderr) in the worker.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import traceback
from typing import Callable, NoReturn

CLONE_NEWNET = 0x40000000
MAX_MESSAGE = 1 << 20
MAX_FDS = 16


def unshare_network() -> None:
    """Move this process into a new, empty network namespace (needs CAP_SYS_ADMIN, as `unshare -n` does)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}")


def fork_quietly() -> int:
    """os.fork() without Python 3.12's warning about threads: torch's import leaves one native thread idle,
    and nothing of torch runs here (the same reason torch's DataLoader forks its workers)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _probe_network_namespace() -> tuple[bool, str]:
    """Whether a forked child can unshare its network namespace (it exits right after)."""
    pid = fork_quietly()
    if pid == 0:
        try:
            unshare_network()
            os._exit(0)
        except BaseException:  # noqa: BLE001 - the exit code is the answer
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    ok = os.waitstatus_to_exitcode(status) == 0
    return ok, "" if ok else "unshare(CLONE_NEWNET) failed in a forked child (needs CAP_SYS_ADMIN)"


def close_fds_except(keep: set[int]) -> None:
    """Close every open descriptor not in `keep` (what Popen's close_fds does for a spawned child)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass    # the directory listing's own descriptor, already closed


def run_as_process(body: Callable[[], int | None]) -> NoReturn:
    """Run `body` as a forked process's whole life and exit as Python would after it: its return value or
    SystemExit's code (None: 0, a message: printed, 1), an uncaught error's traceback on stderr (1), the
    streams flushed, no atexit handler or finalizer of the process it was forked from."""
    code = 70
    try:
        result = body()
        code = 0 if result is None else int(result)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - on the process's stderr, as an uncaught error would be
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001 - a stderr that cannot be written: the exit code still says it
            pass
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _worker(req: dict, fds: list[int], in_session: int) -> NoReturn:
    """In the worker (the reaper's child): become what `python -m MODULE ARGS` in a fresh session would be,
    then run it."""
    def become_and_run() -> None:
        os.setsid()
        os.close(in_session)       # the reaper hands out our pid only now: killpg(pid) reaches us from here on
        if req.get("netns"):
            unshare_network()
        out, err, passed = fds[0], fds[1], fds[2:]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        close_fds_except({0, 1, 2, *passed})
        if sys.path and sys.path[0] == os.getcwd():
            sys.path[0] = req["cwd"]           # `-m` puts the start directory first: the worker's, not ours
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        args = [a.format(**{f"fd{i}": fd for i, fd in enumerate(passed)}) if a.startswith("{fd") else a
                for a in req["args"]]
        import runpy
        sys.argv = [req["module"]] + args      # runpy replaces argv[0] with the module's file, as `-m` does
        sys.modules.pop(req["module"], None)   # as under `-m`, the module runs only as __main__ (and runpy
                                               # warns about a copy already imported)
        runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
    run_as_process(become_and_run)


def _reaper(sock: socket.socket, req: dict, fds: list[int]) -> None:
    """Fork the worker, tell the parent its pid, wait for it and tell its exit code. Never returns."""
    try:
        sock.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)     # the zygote ignores it; waitpid needs it back
        status_w, worker_fds = fds[-1], fds[:-1]
        session_r, session_w = os.pipe()
        pid = fork_quietly()
        if pid == 0:
            os.close(status_w)
            os.close(session_r)
            _worker(req, worker_fds, session_w)
        for fd in worker_fds:      # the parent sees EOF on the worker's pipes only once no copy is left
            os.close(fd)
        os.close(session_w)
        os.read(session_r, 1)      # EOF once the worker is its own session leader (or has died)
        os.close(session_r)
        os.write(status_w, f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(status_w, f"{os.waitstatus_to_exitcode(status)}\n".encode())
    finally:
        os._exit(0)


def serve(sock: socket.socket) -> None:
    t0 = time.monotonic()
    import torch  # noqa: F401 - the point of this process
    import sandbox.worker  # noqa: F401 - and the worker's own modules
    import sandbox.compile  # noqa: F401
    if "triton" in sys.modules:
        raise RuntimeError("triton was imported before the fork: a worker could not choose the interpreter "
                           "or the compiler after it")
    netns, netns_note = _probe_network_namespace()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)        # reapers exit unwaited-for: the kernel reaps them
    sock.send(json.dumps({"kind": "ready", "pid": os.getpid(), "import_s": round(time.monotonic() - t0, 3),
                          "netns": netns, "netns_note": netns_note}).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
        except OSError:
            return
        if not msg:
            return                 # the parent closed its end (or died): nothing more to serve
        try:
            req = json.loads(msg)
            if len(fds) < 3:
                raise ValueError(f"{len(fds)} descriptors passed; at least stdout, stderr and the status pipe")
            pid = fork_quietly()
            if pid == 0:
                _reaper(sock, req, fds)
            reply = {"kind": "forked", "reaper": pid}
        except Exception as e:  # noqa: BLE001 - the parent falls back to spawning
            reply = {"kind": "error", "error": f"{type(e).__name__}: {e}"}
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps(reply).encode())


def main(argv: list[str]) -> None:
    fd = int(argv[argv.index("--control") + 1])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
    try:
        serve(sock)
    except BaseException:  # noqa: BLE001 - the parent reads the reason from the socket or the log
        text = traceback.format_exc()
        sys.stderr.write(text)
        try:
            sock.send(json.dumps({"kind": "error", "error": text[-2000:]}).encode())
        except OSError:
            pass
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
