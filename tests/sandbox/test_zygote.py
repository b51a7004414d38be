"""The fork server (sandbox/zygote.py, sandbox/zygote_client.py, sandbox/forked_child.py): a worker it forks
is the fresh, isolated process a spawned one was (own session, own network namespace, only its own
descriptors, the asked-for directory and environment, torch loaded and triton not), its exit code comes
back as Popen's would, and anything wrong with the server falls back to spawning and says so.

A probe module written to a temporary folder stands in for sandbox.worker: it reports what it sees.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import zygote_client
from sandbox.forked_child import ForkedChild
from sandbox.isolation import PROJECT_ROOT, WorkerProcess, worker_environment
from sandbox.zygote_client import ForkedProcess, Zygote, ZygoteError

pytestmark = pytest.mark.interpreter

PROBE = r'''
import json, os, sys
args = sys.argv[1:]
seen = [int(f) for f in os.listdir("/proc/self/fd")]
open_fds = []
for fd in seen:           # the listing's own descriptor is closed by now
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
report = {"pid": os.getpid(), "sid": os.getsid(0), "pgid": os.getpgid(0), "fds": sorted(open_fds),
          "netns": os.readlink("/proc/self/ns/net"), "cwd": os.getcwd(), "env": dict(os.environ),
          "torch": "torch" in sys.modules, "triton": "triton" in sys.modules, "argv": args,
          "main": __name__}
if "--pipe" in args:
    os.write(int(args[args.index("--pipe") + 1]), b"through the passed pipe\n")
print(json.dumps(report), flush=True)
if "--exit" in args:
    sys.exit(int(args[args.index("--exit") + 1]))
if "--kill-self" in args:
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
if "--sleep" in args:
    import time
    time.sleep(600)
'''


@pytest.fixture()
def probe_env(tmp_path) -> dict[str, str]:
    (tmp_path / "zygote_probe.py").write_text(PROBE)
    env = worker_environment(interpreter=True, home=tmp_path)
    env["PYTHONPATH"] = f"{PROJECT_ROOT}{os.pathsep}{tmp_path}"
    return env


def fork_probe(z: Zygote, tmp_path: Path, *args: str, pass_fds: tuple[int, ...] = (), netns: bool = False
               ) -> tuple[ForkedProcess, Path, Path]:
    out, err = tmp_path / f"out{time.monotonic_ns()}.txt", tmp_path / f"err{time.monotonic_ns()}.txt"
    (tmp_path / "cwd").mkdir(exist_ok=True)
    env = dict(z.env, AKA_PROBE="yes")
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = z.fork(module="zygote_probe", args=list(args), cwd=tmp_path / "cwd", env=env, stdout_fd=o.fileno(),
                      stderr_fd=e.fileno(), pass_fds=pass_fds, netns=netns)
    return proc, out, err


@pytest.fixture()
def zygote(probe_env):
    z = Zygote(probe_env)
    yield z
    z.close()


def report_of(out: Path) -> dict:
    return json.loads(out.read_text().splitlines()[0])


def test_a_forked_worker_is_a_fresh_isolated_process(zygote, tmp_path):
    r, w = os.pipe()
    try:
        proc, out, err = fork_probe(zygote, tmp_path, "--pipe", "{fd0}", "--exit", "0", pass_fds=(w,),
                                    netns=True)
    except ZygoteError as e:
        if "unshare" not in str(e):
            raise
        pytest.skip(f"no network namespaces here: {e}")
    finally:
        os.close(w)
    assert proc.wait(timeout=60) == 0, err.read_text()
    assert os.read(r, 100) == b"through the passed pipe\n"
    os.close(r)
    rep = report_of(out)
    passed = int(rep["argv"][rep["argv"].index("--pipe") + 1])
    assert rep["pid"] == proc.pid and rep["pid"] != zygote.proc.pid
    assert rep["sid"] == rep["pid"] == rep["pgid"], "not in a session of its own"
    assert rep["fds"] == sorted({0, 1, 2, passed}), f"descriptors beyond stdio and the passed pipe: {rep['fds']}"
    assert rep["netns"] != os.readlink("/proc/self/ns/net")
    assert rep["cwd"] == str(tmp_path / "cwd")
    assert rep["env"] == dict(zygote.env, AKA_PROBE="yes")
    assert rep["torch"] and not rep["triton"] and rep["main"] == "__main__"
    assert err.read_text() == "", "the worker's stderr should hold only what the worker wrote"


def test_each_fork_is_a_new_process(zygote, tmp_path):
    pids = set()
    for _ in range(3):
        proc, out, _ = fork_probe(zygote, tmp_path, "--exit", "0")
        assert proc.wait(timeout=60) == 0
        pids.add(report_of(out)["pid"])
    assert len(pids) == 3


def test_exit_codes_and_signals_come_back_as_popen_returncodes(zygote, tmp_path):
    proc, _, _ = fork_probe(zygote, tmp_path, "--exit", "7")
    assert proc.wait(timeout=60) == 7 and proc.poll() == 7
    proc, _, _ = fork_probe(zygote, tmp_path, "--kill-self")
    assert proc.wait(timeout=60) == -signal.SIGKILL
    proc, out, _ = fork_probe(zygote, tmp_path, "--sleep")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.3)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGTERM)           # its own process group, as isolation.py kills it
    assert proc.wait(timeout=30) == -signal.SIGTERM


def test_a_server_that_cannot_start_raises_with_its_log_and_stays_broken(probe_env, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "torch.py").write_text("raise ImportError('torch is broken here')\n")
    z = Zygote(dict(probe_env, PYTHONPATH=f"{broken}{os.pathsep}{probe_env['PYTHONPATH']}"))
    try:
        with pytest.raises(ZygoteError, match="(?s)failed to start.*torch is broken here"):
            fork_probe(z, tmp_path, "--exit", "0")
        assert not z.alive()
        with pytest.raises(ZygoteError, match="torch is broken here"):
            fork_probe(z, tmp_path, "--exit", "0")
    finally:
        z.close()


def test_the_registry_keys_by_environment_and_replaces_a_dead_server(probe_env, tmp_path):
    zygote_client.close_all()
    z1 = zygote_client.zygote_for(probe_env)
    assert zygote_client.zygote_for(dict(probe_env, HOME="/elsewhere")) is z1   # HOME is set per worker
    proc, _, _ = fork_probe(z1, tmp_path, "--exit", "0")
    assert proc.wait(timeout=60) == 0
    z1.proc.kill()
    z1.proc.wait(timeout=30)
    z2 = zygote_client.zygote_for(probe_env)
    assert z2 is not z1
    proc, _, _ = fork_probe(z2, tmp_path, "--exit", "0")
    assert proc.wait(timeout=60) == 0
    other = zygote_client.zygote_for(dict(probe_env, PYTHONHASHSEED="1"))    # read at start-up: another server
    assert other is not z2
    zygote_client.close_all()


def test_an_interpreter_worker_is_forked_and_falls_back_to_spawning_saying_why(monkeypatch):
    zygote_client.close_all()
    with WorkerProcess(interpreter=True, timeout_s=60.0) as w:
        w.start()
        assert w.started_by == "forked by the fork server" and isinstance(w.proc, ForkedProcess)
    with WorkerProcess(interpreter=False, timeout_s=60.0) as w:
        assert not w.fork_server                  # GPU workers are always spawned
    zygote_client.close_all()
    monkeypatch.setattr(zygote_client, "READY_TIMEOUT_S", 0.0)      # a server too slow to get ready
    with WorkerProcess(interpreter=True, timeout_s=60.0) as w:
        w.start()
        assert w.started_by.startswith("spawned (the fork server could not fork it: no ready message")
        assert isinstance(w.proc, subprocess.Popen)
    zygote_client.close_all()
    with WorkerProcess(interpreter=True, timeout_s=60.0, fork_server=False) as w:
        w.start()
        assert w.started_by == "spawned" and isinstance(w.proc, subprocess.Popen)


def _echo_stdin_to_stderr() -> int:
    line = sys.stdin.readline()
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
            fds.append(int(name))
        except OSError:
            pass
    sys.stderr.write(f"got {line.strip()} in {os.getcwd()} with {os.environ.get('FORKED')} fds {sorted(fds)}\n")
    return 3


def test_a_forked_child_gets_a_pipe_for_stdin_and_nothing_else(tmp_path):
    stray_r, stray_w = os.pipe()          # a descriptor the parent holds (the worker's private pipes, say)
    try:
        child = ForkedChild(_echo_stdin_to_stderr, cwd=tmp_path, env={"FORKED": "env"},
                            stderr_path=tmp_path / "err.txt", name="echo")
        child.stdin.write(b"hello\n")
        child.stdin.close()
        assert child.wait(timeout=60) == 3 and child.returncode == 3
    finally:
        os.close(stray_r)
        os.close(stray_w)
    assert (tmp_path / "err.txt").read_text() == f"got hello in {tmp_path} with env fds [0, 1, 2]\n"
    sleeper = ForkedChild(lambda: time.sleep(600) or 0, cwd=tmp_path, env={}, stderr_path=tmp_path / "e2.txt",
                          name="sleeper")
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.2)
    sleeper.kill()
    assert sleeper.wait(timeout=30) == -signal.SIGKILL


def test_the_pid_comes_back_only_once_its_process_group_can_be_killed(zygote, tmp_path):
    """killpg(pid) right after the fork returns must reach the worker (a kill at the deadline, or of a spare
    that is closed at once): so the worker leads its session before its pid is handed out."""
    for _ in range(5):
        proc, _, _ = fork_probe(zygote, tmp_path, "--sleep")
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
