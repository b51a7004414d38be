"""benchmarks/gpu_lock.py: one process at a time holds the GPU's lock, a killed holder frees it, a waiter gives
up after its timeout and says so, AKA_GPU_LOCK picks the file or turns the lock off. Real processes, real flock."""
import subprocess
import sys
import time

import pytest

from benchmarks import gpu_lock, gpu_timer

HOLDER = ("import sys, time; from benchmarks import gpu_lock\n"
          "with gpu_lock.exclusive():\n"
          "    print('held', flush=True); time.sleep(float(sys.argv[1]))\n")


@pytest.fixture
def lock_file(tmp_path, monkeypatch):
    path = tmp_path / "gpu.lock"
    monkeypatch.setenv(gpu_lock.ENV, str(path))
    return path


def _holder(seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_waits_until_the_holder_lets_go(lock_file):
    stats = dict.fromkeys(gpu_lock.STATS, 0)
    holder = _holder(0.4)
    t0 = time.monotonic()
    with gpu_lock.exclusive(stats=stats):
        waited = time.monotonic() - t0
    holder.wait()
    assert waited >= 0.2
    assert stats["lock_waits"] == 1 and stats["lock_wait_ms"] >= 200 and stats["lock_timeouts"] == 0


def test_a_killed_holder_frees_the_lock(lock_file):
    holder = _holder(60)
    holder.kill()
    holder.wait()
    stats = dict.fromkeys(gpu_lock.STATS, 0)
    with gpu_lock.exclusive(timeout_s=5, stats=stats):
        pass
    assert stats["lock_timeouts"] == 0


def test_a_waiter_goes_on_without_the_lock_after_its_timeout_and_counts_it(lock_file):
    holder = _holder(60)
    try:
        stats = dict.fromkeys(gpu_lock.STATS, 0)
        t0 = time.monotonic()
        with gpu_lock.exclusive(timeout_s=0.2, stats=stats):
            ran = True
        assert ran and 0.2 <= time.monotonic() - t0 < 5
        assert stats == {"lock_waits": 1, "lock_wait_ms": stats["lock_wait_ms"], "lock_timeouts": 1}
    finally:
        holder.kill()
        holder.wait()


def test_off_unless_set_and_the_default_file_is_per_visible_devices(monkeypatch, tmp_path):
    for value in ("off", "", None):
        if value is None:
            monkeypatch.delenv(gpu_lock.ENV, raising=False)
        else:
            monkeypatch.setenv(gpu_lock.ENV, value)
        assert gpu_lock.lock_path() is None
        with gpu_lock.exclusive():
            pass
    monkeypatch.setenv(gpu_lock.ENV, "on")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    a = gpu_lock.lock_path(0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert gpu_lock.lock_path(0) != a and gpu_lock.lock_path(1) != gpu_lock.lock_path(0)


def test_take_stats_resets_and_the_timer_reports_them_with_its_hold_counts(lock_file):
    gpu_lock.take_stats()
    gpu_timer.take_hold_stats()
    holder = _holder(0.2)
    with gpu_lock.exclusive():
        pass
    holder.wait()
    out = gpu_timer.take_hold_stats()
    assert out["lock_waits"] == 1 and out["batches"] == 0
    assert gpu_lock.take_stats() == {"lock_waits": 0, "lock_wait_ms": 0, "lock_timeouts": 0}


def test_a_nested_use_does_not_wait_and_the_outer_one_still_keeps_others_out(lock_file):
    """A timed phase holds the lock and its batches take it again: the inner use must not wait for itself."""
    stats = dict.fromkeys(gpu_lock.STATS, 0)
    probe = ("import sys; from benchmarks import gpu_lock\n"
             "s = dict.fromkeys(gpu_lock.STATS, 0)\n"
             "with gpu_lock.exclusive(timeout_s=0.2, stats=s): pass\n"
             "print(s['lock_timeouts'])")
    with gpu_lock.exclusive(stats=stats):
        with gpu_lock.exclusive(timeout_s=0.1, stats=stats):
            other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert stats == {"lock_waits": 0, "lock_wait_ms": 0, "lock_timeouts": 0}
    assert other.stdout.strip() == "1"                   # the other process timed out: the lock was held
    with gpu_lock.exclusive(timeout_s=0.1, stats=stats):  # and it was let go at the outer exit
        pass
    assert stats["lock_timeouts"] == 0


def test_a_lock_file_that_cannot_be_opened_names_the_setting_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv(gpu_lock.ENV, str(tmp_path / "no" / "such" / "dir" / "gpu.lock"))
    with pytest.raises(OSError, match="AKA_GPU_LOCK=.*writable.*on.*off"):
        with gpu_lock.exclusive():
            pass
