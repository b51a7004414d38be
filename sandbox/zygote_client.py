"""The parent's side of the fork server (sandbox/zygote.py): start one per environment, ask it for
workers, and hold each worker as a Popen-like `ForkedProcess` (pid, poll, wait, returncode).

A zygote serves the environment it was started with (the variables a fresh Python reads at start-up,
PYTHONHASHSEED and PYTHONPATH among them, are fixed from then on); a request with another environment
gets another zygote. Anything that goes wrong with a zygote (it is missing, died, is slow to get ready,
cannot make network namespaces) raises ZygoteError, and sandbox/isolation.py spawns the worker as
before: the fork server only ever saves time.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

READY_TIMEOUT_S = 120.0     # its `import torch`: ~2 s on 2 cores, 23 s once with a cold page cache
REPLY_TIMEOUT_S = 30.0
MAX_SERVERS = 2             # environments kept at once (tests that change the environment start more)


class ZygoteError(Exception):
    """The fork server could not start this worker; the caller spawns it instead."""


class ForkedProcess:
    """A worker forked by a zygote. Its exit code comes from its reaper over the status pipe: the parent
    is not its parent and cannot wait for it. EOF without a code (the reaper was killed) reads as SIGKILL:
    the worker's fate is unknown, and the caller kills its process group either way."""

    def __init__(self, pid: int, status_fd: int, args: list[str], rest: bytes = b""):
        self.pid, self.args = pid, args
        self.returncode: int | None = None
        self._fd, self._buf = status_fd, rest
        self._take()

    def _take(self) -> None:
        if self.returncode is None and b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self.returncode = int(line)
            self._close()

    def _read(self, timeout: float) -> None:
        if self._fd < 0:
            return
        ready, _, _ = select.select([self._fd], [], [], max(0.0, timeout))
        if not ready:
            return
        data = os.read(self._fd, 64)
        if data:
            self._buf += data
            self._take()
        else:
            self.returncode = -signal.SIGKILL if self.returncode is None else self.returncode
            self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def poll(self) -> int | None:
        self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            remaining = 0.5 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read(min(remaining, 0.5))
        return self.returncode

    def __del__(self):
        self._close()


class Zygote:
    """One fork server process (its own session; dies when the socket to it closes)."""

    def __init__(self, env: dict[str, str]):
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.tmp = Path(tempfile.mkdtemp(prefix="aka-zygote-"))
        for d in ("work", "home"):
            (self.tmp / d).mkdir()
        self.env = env = dict(env, HOME=str(self.tmp / "home"))  # a worker's HOME is its own, set after the fork
        self.log = self.tmp / "zygote.log"
        self.ready: dict | None = None
        self.broken: str | None = None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen([sys.executable, "-m", "sandbox.zygote", "--control", str(theirs.fileno())],
                                             cwd=self.tmp / "work", env=env, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=log, pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            ours.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self.sock = ours

    def _recv(self, timeout: float, what: str) -> dict:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            raise ZygoteError(f"no {what} from the fork server within {timeout:g} s")
        try:
            data = self.sock.recv(1 << 20)
        except OSError as e:
            raise ZygoteError(f"the fork server's socket failed: {e}") from None
        if not data:
            raise ZygoteError(f"the fork server exited (log: {self._log_tail()})")
        return json.loads(data)

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-300:].strip() or "empty"
        except OSError:
            return "unreadable"

    def alive(self) -> bool:
        return self.broken is None and self.proc.poll() is None

    def fork(self, *, module: str, args: list[str], cwd: Path, env: dict[str, str], stdout_fd: int,
             stderr_fd: int, pass_fds: tuple[int, ...], netns: bool) -> ForkedProcess:
        with self.lock:
            try:
                return self._fork(module, args, cwd, env, stdout_fd, stderr_fd, pass_fds, netns)
            except ZygoteError as e:
                self.broken = str(e)
                raise

    def _fork(self, module, args, cwd, env, stdout_fd, stderr_fd, pass_fds, netns) -> ForkedProcess:
        if self.broken:
            raise ZygoteError(self.broken)
        if self.ready is None:
            reply = self._recv(READY_TIMEOUT_S, "ready message")
            if reply.get("kind") != "ready":
                raise ZygoteError(f"the fork server failed to start: {reply.get('error', reply)}")
            self.ready = reply
        if netns and not self.ready.get("netns"):
            raise ZygoteError(self.ready.get("netns_note") or "no network namespaces in the fork server")
        status_r, status_w = os.pipe()
        try:
            request = {"module": module, "args": args, "cwd": str(cwd), "env": env, "netns": bool(netns)}
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [stdout_fd, stderr_fd, *pass_fds, status_w])
            except OSError as e:
                raise ZygoteError(f"the fork server did not take the request: {e}") from None
            finally:
                os.close(status_w)
            reply = self._recv(REPLY_TIMEOUT_S, "reply")
            if reply.get("kind") != "forked":
                raise ZygoteError(f"the fork server could not fork: {reply.get('error', reply)}")
            buf, deadline = b"", time.monotonic() + REPLY_TIMEOUT_S
            while b"\n" not in buf:           # the reaper writes the worker's pid first thing
                left = deadline - time.monotonic()
                ready, _, _ = select.select([status_r], [], [], max(0.0, left))
                chunk = os.read(status_r, 64) if ready else b""
                if not chunk:
                    raise ZygoteError("the fork server's reaper sent no worker pid")
                buf += chunk
        except BaseException:
            os.close(status_r)
            raise
        line, rest = buf.split(b"\n", 1)
        return ForkedProcess(int(line), status_r, [sys.executable, "-m", module, *args], rest)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)    # its session: the zygote and idle reapers, no worker
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)


_ZYGOTES: dict[tuple, Zygote] = {}
_LOCK = threading.Lock()


def zygote_for(env: dict[str, str]) -> Zygote:
    """This process's zygote for `env` (HOME aside: each worker sets its own), started on first use."""
    key = tuple(sorted((k, v) for k, v in env.items() if k != "HOME"))
    with _LOCK:
        z = _ZYGOTES.get(key)
        if z is not None and (z.owner != os.getpid() or not z.alive()):
            _ZYGOTES.pop(key)
            if z.owner == os.getpid():
                z.close()
            z = None
        if z is None:
            while len(_ZYGOTES) >= MAX_SERVERS:
                _ZYGOTES.pop(next(iter(_ZYGOTES))).close()
            try:
                z = Zygote(env)
            except OSError as e:
                raise ZygoteError(f"could not start the fork server: {e}") from None
            _ZYGOTES[key] = z
        return z


@atexit.register
def close_all() -> None:
    """Stop this process's zygotes (workers they forked are in their own sessions, closed by their owners)."""
    with _LOCK:
        for z in list(_ZYGOTES.values()):
            if z.owner == os.getpid():
                z.close()
        _ZYGOTES.clear()
