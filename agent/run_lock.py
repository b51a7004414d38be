"""One run, one writer: a per-run OS file lock next to the audit database.

    with run_lock(cfg.audit_db, run_id) as lock:   # raises RunLocked while another process writes the run
        ...

The lock is `fcntl.flock` on `<db dir>/locks/<run id>.lock`, so the kernel releases it when the
holder exits in any way (return, exception, SIGKILL, power cut of the process): there is no lock a
dead process can keep. The file also names its holder (pid, host, start time) for the refusal
message, and is emptied on a clean release; a file that still names a holder when the lock is free
was left by a process that died without releasing it (kill -9), and `stale` tells the new holder so.

flock works between processes of one host, and on NFS only where the server supports it (Linux
NFSv4 does); two hosts writing one run on a filesystem without it are not caught.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


class RunLocked(RuntimeError):
    """Another live process holds the run's lock."""

    def __init__(self, run_id: str, holder: dict, path: Path):
        self.run_id, self.holder, self.path = run_id, holder, path
        pid, host = holder.get("pid", "?"), holder.get("host", "?")
        since = holder.get("since", "")
        super().__init__(f"run {run_id} is being written by pid {pid} on host {host}"
                         + (f" since {since}" if since else "")
                         + f"; one run has one writer: wait for it to end, or stop it (kill {pid} on {host}) "
                           f"and resume again (lock file {path})")


@dataclass
class RunLock:
    run_id: str
    path: Path
    stale: dict | None = None      # the holder a dead process left in the file, when the lock was taken over
    fd: int | None = None

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)     # a clean release leaves no holder behind
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None


def lock_path(audit_db: str | Path, run_id: str) -> Path:
    return Path(audit_db).parent / "locks" / f"{run_id}.lock"


def _read_holder(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    try:
        holder = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError):
        holder = {"pid": "?", "host": "?", "note": "unreadable lock file"}
    return holder if isinstance(holder, dict) else {}


def acquire(audit_db: str | Path, run_id: str) -> RunLock:
    """Take the run's lock or raise RunLocked naming the live holder."""
    path = lock_path(audit_db, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = _read_holder(fd)
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise RunLocked(run_id, holder, path) from None
        raise
    stale = _read_holder(fd) or None
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(me).encode())
    os.fsync(fd)
    return RunLock(run_id, path, stale, fd)


@contextmanager
def run_lock(audit_db: str | Path, run_id: str) -> Iterator[RunLock]:
    """Hold the run's lock for the block; released on any exit (the kernel releases it on death)."""
    lock = acquire(audit_db, run_id)
    try:
        yield lock
    finally:
        lock.release()
