"""One process at a time on the GPU's timed work: an advisory file lock that timed batches and a worker's GPU
start-up both take.

Why (session 38, an H100): inside `aka optimize` searches the latency floor read 1.00-1.73 us, while fresh
quiet processes read 1.43-1.56, and so did processes beside one busy-looping process per core, with or without
the hold before each timed batch (gpu_timer.held_batch). What a search has and those had not: pre-started
workers (sandbox/prestart.py) bring up a CUDA context, a CUPTI profiler session and the digest kernel while the
current evaluation times its kernels. GPU work of another context interleaves with the timed replays, and an
interval between two events then holds time that is not the timed graph's.

How: `exclusive()` takes an flock on one file per GPU (keyed by CUDA_VISIBLE_DEVICES and the device index, in
the temp directory, or the path in AKA_GPU_LOCK). The kernel releases an flock when its process dies, so a
killed worker never leaves it held. A waiter polls and after `timeout_s` goes on without it, counted, so a
process stuck in start-up slows timing down but never stops it. AKA_GPU_LOCK=off turns the lock off (the
floor study's control runs). Two runs on one GPU with different CUDA_VISIBLE_DEVICES strings get different
files and are not kept apart.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time

ENV = "AKA_GPU_LOCK"
WAIT_TIMEOUT_S = 30.0            # a worker's GPU start-up took 1-6 s on the H200 (the first CUPTI session 5.4)
POLL_S = 0.001
STATS = {"lock_waits": 0, "lock_wait_ms": 0, "lock_timeouts": 0}


def lock_path(device_index: int = 0) -> str | None:
    """The lock file for this process's GPU, or None when AKA_GPU_LOCK=off."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return chosen
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_").replace("/", "_") or "none"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"aka-gpu-{uid}-{visible}-{device_index}.lock")


@contextlib.contextmanager
def exclusive(device_index: int = 0, timeout_s: float = WAIT_TIMEOUT_S, stats: dict | None = None):
    """Hold the GPU's lock for the block; wait for it at most timeout_s, then run the block without it. stats
    (STATS by default) counts the waits, the milliseconds waited and the timeouts."""
    stats = STATS if stats is None else stats
    path = lock_path(device_index)
    if path is None:
        yield
        return
    import fcntl
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        locked, t0 = False, time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                if time.monotonic() - t0 >= timeout_s:
                    break
                time.sleep(POLL_S)
        waited = time.monotonic() - t0
        if waited >= POLL_S:
            stats["lock_waits"] += 1
            stats["lock_wait_ms"] += int(round(waited * 1e3))
        if not locked:
            stats["lock_timeouts"] += 1
        try:
            yield
        finally:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def take_stats() -> dict:
    """STATS since the last call, and reset."""
    out = dict(STATS)
    for k in STATS:
        STATS[k] = 0
    return out
