"""benchmarks/gpu_timer.py held_batch: a timed batch is queued whole behind a GPU hold, retried behind longer holds
when the host was slower than the hold, and counted unheld when it never was; the worker's counts reach the
evaluation's environment (sandbox/gpu_gates.py add_hold_stats).

The policy runs here against a simulated host and GPU clock (no CUDA on this machine); the GPU tests run the real
hold (torch.cuda._sleep) with every CPU core kept busy, the situation that moved the floor in session 37."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks import gpu_timer
from sandbox.gpu_gates import add_hold_stats


class SimulatedStream:
    """Host time advances as the host queues; the GPU leaves a hold `seconds` after it began it. `stalls` are the
    host's delays (a descheduled thread) while queueing, one per try, 0 once they run out."""

    def __init__(self, per_op_s: float, ops: int, stalls=()):
        self.now, self.hold_ends, self.per_op_s, self.ops = 0.0, 0.0, per_op_s, ops
        self.stalls, self.holds, self.queued = list(stalls), [], 0

    def sync(self):
        self.now = max(self.now, self.hold_ends)

    def hold(self, seconds: float):
        self.holds.append(seconds)
        self.hold_ends = self.now + seconds

    def queue(self):
        self.queued += 1
        self.now += self.per_op_s * self.ops + (self.stalls.pop(0) if self.stalls else 0.0)

    def started(self) -> bool:
        return self.now >= self.hold_ends

    def run(self, stats: dict, hold=True) -> bool:
        return gpu_timer.held_batch(self.queue, hold=self.hold if hold else None, started=self.started,
                                    sync=self.sync, ops=self.ops, stats=stats)


def fresh_stats() -> dict:
    return {"batches": 0, "held": 0, "retried": 0, "unheld": 0}


def test_a_quiet_host_queues_the_batch_inside_the_first_hold():
    sim, stats = SimulatedStream(per_op_s=10e-6, ops=82), fresh_stats()
    assert sim.run(stats)
    assert sim.queued == 1 and stats == {"batches": 1, "held": 1, "retried": 0, "unheld": 0}
    assert sim.holds == [pytest.approx(gpu_timer.HOLD_FIXED_S + gpu_timer.HOLD_PER_OP_S * 82)]


def test_a_host_stalled_past_the_hold_runs_the_batch_again_behind_a_longer_one():
    first = gpu_timer.HOLD_FIXED_S + gpu_timer.HOLD_PER_OP_S * 82
    sim, stats = SimulatedStream(per_op_s=10e-6, ops=82, stalls=[2 * first]), fresh_stats()
    assert sim.run(stats)
    assert sim.queued == 2 and stats == {"batches": 1, "held": 1, "retried": 1, "unheld": 0}
    assert sim.holds == [pytest.approx(first), pytest.approx(first * gpu_timer.HOLD_GROWTH)]


def test_a_host_slower_than_every_hold_leaves_the_batch_unheld_after_the_last_try():
    sim, stats = SimulatedStream(per_op_s=10.0, ops=4), fresh_stats()
    assert not sim.run(stats)
    assert sim.queued == gpu_timer.HOLD_TRIES
    assert stats == {"batches": 1, "held": 0, "retried": 1, "unheld": 1}


def test_without_a_hold_the_batch_runs_once_and_is_counted_unheld():
    sim, stats = SimulatedStream(per_op_s=10e-6, ops=4), fresh_stats()
    assert not sim.run(stats, hold=False)
    assert sim.queued == 1 and sim.holds == [] and stats["unheld"] == 1


def test_counts_accumulate_and_are_taken_once():
    gpu_timer.take_hold_stats()
    for stalls in ([], [1.0]):
        SimulatedStream(per_op_s=10e-6, ops=10, stalls=stalls).run(gpu_timer.HOLD_STATS)
    lock = {"lock_waits": 0, "lock_wait_ms": 0, "lock_timeouts": 0}      # the GPU lock's counts (test_gpu_lock)
    assert gpu_timer.take_hold_stats() == {"batches": 2, "held": 2, "retried": 1, "unheld": 0, **lock}
    assert gpu_timer.take_hold_stats() == {**fresh_stats(), **lock}


def test_add_hold_stats_sums_the_replies_counts_and_ignores_what_is_not_a_count():
    total = add_hold_stats({}, {"batches": 2, "held": 2, "retried": 0, "unheld": 0})
    add_hold_stats(total, {"batches": 3, "held": 2, "retried": 1, "unheld": 1, "note": "x", "flag": True})
    add_hold_stats(total, None)       # a worker from before holds sends none
    assert total == {"batches": 5, "held": 4, "retried": 1, "unheld": 1}


@pytest.mark.gpu
def test_the_floor_is_timed_behind_holds_with_every_cpu_core_busy():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    assert hasattr(torch.cuda, "_sleep"), "this torch has no torch.cuda._sleep: timed batches run unheld"
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        gpu_timer.take_hold_stats()
        floor = gpu_timer.measure_floor_s(pdl=False)
        stats = gpu_timer.take_hold_stats()
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert floor > 0
    assert stats["batches"] >= 2 and stats["unheld"] == 0, stats
