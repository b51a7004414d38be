"""A child process made by os.fork() that a caller holds as it would a subprocess.Popen: pid, stdin,
poll, wait(timeout), kill, returncode.

Used by the interpreter worker for its compile child (sandbox/compile.py): a worker forked by the fork
server (sandbox/zygote.py) has torch imported and triton not yet, so a forked child can still choose the
real compiler over the interpreter, and starts without the 2.4 s of CPU a fresh `import torch` costs.
The child gets what Popen would give it: stdin from a pipe, stdout to /dev/null, stderr to a file, no
other descriptor (the worker's private pipes above all), the given working directory and environment.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from sandbox.zygote import close_fds_except, fork_quietly, run_as_process


class ForkedChild:
    def __init__(self, target: Callable[[], int], *, cwd: Path, env: dict[str, str], stderr_path: Path,
                 name: str):
        self.args, self.returncode = [name], None
        read_end, write_end = os.pipe()
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.pid = fork_quietly()
            if self.pid == 0:
                _child(target, read_end, err, cwd, env)
        finally:
            os.close(read_end)
            os.close(err)
        self.stdin = os.fdopen(write_end, "wb")

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _child(target: Callable[[], int], stdin_fd: int, stderr_fd: int, cwd: Path, env: dict[str, str]) -> None:
    def become_and_run() -> int:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(stdin_fd, 0)
        os.dup2(null, 1)
        os.dup2(stderr_fd, 2)
        close_fds_except({0, 1, 2})
        # The inherited stream objects may wrap descriptors closed above (a caller's own redirections):
        # fresh ones on 0, 1 and 2, as a new process would have
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        return target()
    run_as_process(become_and_run)
