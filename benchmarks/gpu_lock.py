"""One process at a time on the GPU's timed work: an advisory file lock that timing and a pre-started worker's
GPU start-up can both take. Off unless AKA_GPU_LOCK is set: its cost is not yet measured (below).

Why (session 38, an H100): inside `aka optimize` searches the latency floor read 1.00-1.73 us, while fresh
quiet processes read 1.43-1.56, and so did processes beside one busy-looping process per core, with or without
the hold before each timed batch (gpu_timer.held_batch). Beside three loops of fresh processes that each did a
pre-started worker's GPU start-up (sandbox/worker.py warm_gpu: CUDA context, CUPTI, the digest kernel) and
exited, the floor read 0.94-1.64 (agent/studies/floor_spread.py --spares): a search's worker pool
(sandbox/prestart.py) does that beside every evaluation. GPU work of another context interleaves with the timed
replays, and an interval between two events then holds time that is not the timed graph's. Which part of the
start-up (the context, CUPTI, the kernel, the exit) does it is not yet measured. Nor is the other explanation the
numbers allow: the spread was downward (0.94-1.2 against 1.43-1.56 quiet), as if other contexts' work kept the
GPU's clocks up between the replays; floor_spread records the SM clock after each floor since session 39.

Session 40's answer (an H100, benchmarks/results/session40_h100.md): it is other contexts, not the start-up's
stages, and not the SM clock as NVML reads it. Three processes launching a tiny kernel a millisecond (no start-up,
no exit) moved every floor down by about 0.2 us (median 1.26 against 1.47 quiet) at 1980 MHz read after every
floor; spares that bring up only their CUDA context spread the floor as much as spares that bring up everything.
Neither this lock (it orders start-up stages and timed phases, not the mere presence of another busy context)
nor skipping the warm stages (it cost a search 5x its time a candidate) removes that; the run's pinned floor
(agent/run_floor.py) and paired rounds in one process are what keep a run's comparisons fair.

What the lock costs is not yet known either: a start-up's GPU stages took 3.2 s on the H100 (0.4 context, 2.3
CUPTI, 0.5 digest kernel) and a search screen about 1 s, so a lock around all of them would make a search wait
for its spares. With a lock around every timed batch, session 38's floor study beside three start-up loops did
not finish in 150 s: the batches queued behind the start-ups one by one. So timing takes it once per timed
phase (gpu_timer.graph_samples, eager_samples, the A/B rounds), not per batch; a process that already holds it
does not wait for it again (a nested use is free, where it would otherwise wait out its own timeout).

How: `exclusive()` takes an flock on one file per GPU: AKA_GPU_LOCK=on picks a file in the temp directory keyed
by CUDA_VISIBLE_DEVICES and the device index, any other value is the file's path, unset or off turns the lock
off. The kernel releases an flock when its process dies, so a killed worker never leaves it held. A waiter
polls and after `timeout_s` goes on without it, counted, so a process stuck in start-up slows timing down but
never stops it. Two runs on one GPU with different CUDA_VISIBLE_DEVICES strings get different files and are
not kept apart.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time

ENV = "AKA_GPU_LOCK"
WAIT_TIMEOUT_S = 30.0            # a start-up's GPU stages: 3.2 s on an H100 (session 38), CUPTI 5.4 on the H200
POLL_S = 0.001
STATS = {"lock_waits": 0, "lock_wait_ms": 0, "lock_timeouts": 0}


_held = {"depth": 0}          # this process's nesting: an inner exclusive() inside an outer one does not wait


def lock_path(device_index: int = 0) -> str | None:
    """The lock file for this process's GPU, or None when the lock is off (AKA_GPU_LOCK unset, empty or off)."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() in ("", "off"):
        return None
    if chosen.lower() != "on":
        return chosen
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_").replace("/", "_") or "none"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"aka-gpu-{uid}-{visible}-{device_index}.lock")


@contextlib.contextmanager
def exclusive(device_index: int = 0, timeout_s: float = WAIT_TIMEOUT_S, stats: dict | None = None):
    """Hold the GPU's lock for the block; wait for it at most timeout_s, then run the block without it. stats
    (STATS by default) counts the waits, the milliseconds waited and the timeouts."""
    path = lock_path(device_index)
    if path is None:
        yield
        return
    fd = None if _held["depth"] else _acquire(path, timeout_s, STATS if stats is None else stats)
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if fd is not None:
            import fcntl
            fcntl.flock(fd, fcntl.LOCK_UN)   # explicit: a child forked meanwhile shares the descriptor's lock
            os.close(fd)


def _acquire(path: str, timeout_s: float, stats: dict) -> int:
    """An open descriptor of `path`, flocked unless timeout_s ran out first (counted in stats)."""
    import fcntl
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise OSError(f"{ENV}={os.environ.get(ENV)!r}: cannot open the GPU's lock file {path} ({e.strerror}); set it "
                      f"to a writable file's path, to on (a file in {tempfile.gettempdir()}) or to off") from e
    t0 = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
            break
        except BlockingIOError:
            if time.monotonic() - t0 >= timeout_s:
                locked = False
                break
            time.sleep(POLL_S)
    waited = time.monotonic() - t0
    if waited >= POLL_S:
        stats["lock_waits"] += 1
        stats["lock_wait_ms"] += int(round(waited * 1e3))
    if not locked:
        stats["lock_timeouts"] += 1
    return fd


def take_stats() -> dict:
    """STATS since the last call, and reset."""
    out = dict(STATS)
    for k in STATS:
        STATS[k] = 0
    return out
