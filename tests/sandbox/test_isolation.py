"""The worker's isolation: every way a candidate can end badly is a rejected verdict naming the cause,
and the parent and the next evaluation carry on.

A tiny operator (out = 2x + y) is written to a temporary folder so these tests do not depend on the real
operators. Candidates that the lint would stop (os._exit, os.kill, subprocess, writing to the pipe)
go through `evaluate_unlinted`: here it is the runtime that must catch them.
"""
from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from benchmarks.hardware import load_hardware
from benchmarks.spec import Shape
from sandbox_requests import make_request
from sandbox.evaluation import EvalRequest, evaluate, evaluate_unlinted
from sandbox.isolation import TAIL_BYTES, describe_exit, network_namespace_support, tail
from sandbox.stage_times import is_part

pytestmark = pytest.mark.interpreter

OPERATOR = '''
import torch
from benchmarks.spec import Tolerance

NAME = "scale_add"
SIGNATURE = "scale_add(x[N], y[N]) -> [N]"
ARGS = ("x", "y")
DESCRIPTION = "out = 2 * x + y, elementwise"
TOLERANCES = {"fp32": Tolerance(1e-5, 1e-5, 1e-5), "bf16": Tolerance(2e-2, 2e-2, 1e-2),
              "fp16": Tolerance(2e-3, 2e-3, 2e-3)}
_DT = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_inputs(dims, dtype, seed, device="cpu"):
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    n = int(dims["N"])
    x = torch.randn(n, generator=g, device=device).to(_DT[dtype])
    return {"x": x, "y": torch.randn(n, generator=g, device=device).to(_DT[dtype])}


def reference(x, y):
    return (2 * x.float() + y.float()).to(x.dtype)


def output_spec(dims, dtype):
    return (int(dims["N"]),), dtype


def work(dims, dtype):
    n = int(dims["N"])
    return {"fp32": 2.0 * n}, 3.0 * n * (4 if dtype == "fp32" else 2)


def interpreter_dims(dims):
    return {"N": min(int(dims["N"]), 5000)}


def holdout_dims(rng, hot_dims):
    return [{"N": rng.randrange(3, 200) | 1}, {"N": 3001 + 2 * rng.randrange(0, 400)}]


def occurrences(model_cfg, tp, tokens):
    return []
'''

CANDIDATE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (2.0 * x + y).to(out_ptr.dtype.element_ty), mask=mask)


def scale_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    #INJECT
    _scale_add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
'''

SHAPES = (Shape.make("small", {"N": 1000}), Shape.make("odd", {"N": 37}))


def candidate(inject: str = "", head: str = "") -> str:
    """The honest candidate with `inject` run in the launcher before the kernel (and `head` after the imports)."""
    body = "\n".join("    " + line for line in inject.strip().splitlines())
    src = CANDIDATE.replace("    #INJECT", body or "    pass")
    return src.replace("import triton.language as tl\n", "import triton.language as tl\n" + head + "\n", 1)


@pytest.fixture(scope="module")
def op_dir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("ops")
    (root / "scale_add").mkdir()
    (root / "scale_add" / "operator.py").write_text(OPERATOR)
    return str(root)


def request(source: str, **kw) -> EvalRequest:
    """Interpreter mode everywhere (also on a GPU machine): these properties do not depend on the device."""
    kw.setdefault("timeout_s", 120.0)
    kw.setdefault("trials", 2)
    kw.setdefault("interpreter", True)
    return make_request("scale_add", source, SHAPES, **kw)


def test_honest_candidate_is_accepted_with_its_environment(op_dir):
    res = evaluate(request(candidate()), operator_dir=op_dir)
    assert res.accepted, res.reasons
    assert res.failed_stage is None and res.interpreter
    assert [r.id for r in res.visible_shapes()] == ["small", "odd"]
    assert all(r.max_abs_err is not None and r.max_abs_err <= 1e-5 for r in res.visible_shapes())
    env = res.environment
    assert env["interpreter"] is True and env["gpu"] and env["torch"] and env["triton"]
    assert env["network_namespace"] == network_namespace_support()[0]
    assert env["worker_started_by"] == "forked by the fork server"     # sandbox/zygote.py; not a silent fallback


@pytest.mark.parametrize("output_slot", [True, False])
def test_outputs_come_back_through_the_slot_or_the_pipe_and_are_judged_the_same(op_dir, output_slot):
    """The output slot (sandbox/output_slot.py) and the pipe carry the same bytes to the same judge: an honest
    kernel passes and one off by a little fails, at the same shape, with the same statistics either way."""
    honest = evaluate(request(candidate(), output_slot=output_slot), operator_dir=op_dir)
    assert honest.accepted, honest.reasons
    assert (honest.environment.get("output_slot_trials", 0) > 0) is output_slot
    off = candidate().replace("(2.0 * x + y)", "(2.0 * x + y + 1e-3)")
    wrong = evaluate(request(off, output_slot=output_slot), operator_dir=op_dir)
    assert wrong.failed_stage == "correctness" and "shape small" in wrong.reasons[0], wrong.reasons
    assert wrong.shapes[0].max_abs_err == pytest.approx(1e-3, rel=0.05)


def test_os_exit_zero_is_a_rejection_naming_the_cause(op_dir):
    res = evaluate_unlinted(request(candidate("import os\nos._exit(0)")), operator_dir=op_dir)
    assert not res.accepted and res.failed_stage == "compile"
    assert "exited with code 0 before reporting" in res.reasons[0]


def test_raise_system_exit_is_a_rejection(op_dir):
    res = evaluate_unlinted(request(candidate("raise SystemExit(3)")), operator_dir=op_dir)
    assert not res.accepted
    assert "SystemExit" in res.reasons[0] and "not allowed" in res.reasons[0]


def test_exception_names_the_type_and_the_candidate_line(op_dir):
    res = evaluate(request(candidate("raise ValueError(\"boom at launch\")")), operator_dir=op_dir)
    assert not res.accepted and res.failed_stage == "compile"
    assert "ValueError: boom at launch" in res.reasons[0]
    assert "candidate.py line" in res.reasons[0]


def test_sigkill_is_a_rejection_and_the_next_evaluation_is_unaffected(op_dir):
    res = evaluate_unlinted(request(candidate("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")),
                            operator_dir=op_dir)
    assert not res.accepted
    assert "killed by signal SIGKILL" in res.reasons[0]
    again = evaluate(request(candidate()), operator_dir=op_dir)
    assert again.accepted, again.reasons


def _alive(pid: int) -> bool:
    """True for a live process; a zombie (killed, not yet reaped by init) counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_hang_times_out_and_kills_the_whole_process_group(op_dir):
    # The hang sleeps rather than spins: the kill is the same, and a spin would take a core from the suite's other
    # worker for the whole 30 s
    inject = ("import subprocess, time\n"
              "child = subprocess.Popen(['sleep', '600'])\n"
              "print('GRANDCHILD', child.pid, flush=True)\n"
              "while True:\n"
              "    time.sleep(1)")
    t0 = time.monotonic()
    # 30 s: the worker's start-up (~1-2 s on 2 cores, over 10 s once under a loaded CI run) fits inside, and the
    # rest is waited out
    res = evaluate_unlinted(request(candidate(inject), timeout_s=30.0), operator_dir=op_dir)
    assert time.monotonic() - t0 < 60
    assert not res.accepted and res.failed_stage == "compile"
    assert "timed out after 30 s (whole process group killed)" in res.reasons[0]
    pid = int(res.stdout_tail.split("GRANDCHILD")[1].split()[0])
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"grandchild {pid} survived the process-group kill"


def test_stdout_flood_is_truncated_to_a_tail(op_dir):
    res = evaluate(request(candidate("print('x' * 200000)\nprint('END OF FLOOD')")), operator_dir=op_dir)
    assert res.accepted, res.reasons
    assert len(res.stdout_tail) <= TAIL_BYTES + 100
    assert res.stdout_tail.startswith("[... ") and "truncated" in res.stdout_tail.splitlines()[0]
    assert res.stdout_tail.rstrip().endswith("END OF FLOOD")


def test_garbage_on_the_private_pipe_is_a_protocol_violation(op_dir):
    inject = ("import os, sys\n"
              "fd = int(sys.argv[sys.argv.index('--replies') + 1])\n"
              "os.write(fd, b'not a frame at all, just bytes' * 4)")
    res = evaluate_unlinted(request(candidate(inject)), operator_dir=op_dir)
    assert not res.accepted
    assert "protocol violation" in res.reasons[0]


def test_environment_secrets_do_not_reach_the_worker(op_dir, monkeypatch):
    monkeypatch.setenv("AKA_TEST_SECRET_API_KEY", "sk-do-not-leak")
    inject = "import os\nprint('SECRET=' + str(os.environ.get('AKA_TEST_SECRET_API_KEY')), flush=True)"
    res = evaluate_unlinted(request(candidate(inject)), operator_dir=op_dir)
    assert res.accepted, res.reasons
    assert "SECRET=None" in res.stdout_tail and "sk-do-not-leak" not in res.stdout_tail


@pytest.mark.skipif(not network_namespace_support()[0], reason="unshare -n does not work on this machine")
def test_worker_has_no_network(op_dir):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    seen = []

    def accept():
        end = time.monotonic() + 60
        while time.monotonic() < end and not seen:
            try:
                conn, _ = server.accept()
                seen.append(conn)
            except OSError:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    # Connected: return garbage (so a leak shows as a rejection). Unreachable: compute honestly.
    inject = ("import socket\n"
              "try:\n"
              f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
              "    y = x\n"
              "except OSError as e:\n"
              "    print('NETWORK', e, flush=True)")
    try:
        res = evaluate_unlinted(request(candidate(inject)), operator_dir=op_dir)
    finally:
        thread.join(timeout=1)
        server.close()
    assert res.environment["network_namespace"] is True and res.environment["worker_loopback"] == "up"
    assert res.accepted, res.reasons
    assert not seen, "the worker reached a socket on the host's loopback"
    assert "NETWORK" in res.stdout_tail


def test_network_namespace_can_be_turned_off_and_says_so(op_dir):
    res = evaluate(request(candidate(), network_namespace=False), operator_dir=op_dir)
    assert res.accepted, res.reasons
    assert res.environment["network_namespace"] is False
    assert "disabled" in res.environment["network_namespace_note"]


def test_describe_exit_and_tail(tmp_path):
    assert "SIGSEGV" in describe_exit(-11) and "out-of-bounds" in describe_exit(-11)
    assert "code 0" in describe_exit(0) and "code 3" in describe_exit(3)
    p = tmp_path / "log.txt"
    p.write_bytes(b"a" * 10000 + b"LAST LINE")
    t = tail(p)
    assert t.endswith("LAST LINE") and "truncated" in t and len(t) < TAIL_BYTES + 100
    p.write_bytes(b"short")
    assert tail(p) == "short"
    assert tail(tmp_path / "missing.txt") == ""


def test_bad_requests_raise_usage_errors(op_dir):
    with pytest.raises(ValueError, match="trials"):
        evaluate(request(candidate(), trials=0), operator_dir=op_dir)
    with pytest.raises(ValueError, match="baseline"):
        evaluate(request(candidate(), baseline="fast"), operator_dir=op_dir)
    with pytest.raises(ValueError, match="empty candidate"):
        evaluate(request(""), operator_dir=op_dir)
    with pytest.raises(ValueError, match="dsl_threshold"):
        evaluate(request(candidate(), dsl_threshold=90), operator_dir=op_dir)


def test_a_run_sandbox_hands_out_prestarted_fresh_workers_and_records_stage_times(op_dir):
    """Second evaluation of a run takes the worker started during the first: a different process, which had
    imported torch and triton before it was asked; both evaluations record where their time went."""
    from sandbox.session import Sandbox
    from sandbox.settings import SandboxSettings
    with Sandbox(SandboxSettings(trials=1, timeout_s=120.0), operator_dir=op_dir) as sb:
        first = sb(request(candidate()))
        second = sb(request(candidate()))
        assert sb.pool.started == 3                 # first, its spare (taken by the second), the second's spare
    assert first.accepted and second.accepted, (first.reasons, second.reasons)
    assert first.environment["worker_prestarted"] is False and second.environment["worker_prestarted"] is True
    stages = dict(first.stage_times)
    for name in ("worker_start", "imports", "setup", "lint", "compile.gate", "references", "correctness"):
        assert name in stages and stages[name] >= 0, name
    assert "worker_wait" in dict(second.stage_times) and "imports" not in dict(second.stage_times)
    assert sum(v for k, v in first.stage_times if not is_part(k)) <= first.wall_s + 1e-6
    # the parts say where the trials went: the worker's first call of each shape, the parent's references
    for name in ("correctness/wait", "correctness/worker.call_first", "correctness/worker.pack",
                 "references/inputs", "references/reference", "references/judge"):
        assert name in stages, name
    assert stages["references/reference"] <= stages["references"]


def test_a_spare_that_died_is_replaced_not_reused():
    from sandbox.prestart import WorkerPool
    with WorkerPool() as pool:
        w1, pre1 = pool.take(interpreter=True, timeout_s=60.0)
        spare = next(iter(pool._spares.values()))[0]
        spare.kill_group()
        w2, pre2 = pool.take(interpreter=True, timeout_s=60.0)
        assert (pre1, pre2) == (False, False) and w2 is not spare and w2.proc.pid != w1.proc.pid
        w1.close()
        w2.close()


def test_precompile_runs_lint_and_compile_only_for_each_source(op_dir):
    from sandbox.session import Sandbox
    with Sandbox(operator_dir=op_dir) as sb:
        ok, broken = sb.precompile("scale_add", [candidate(), candidate(head="import os\n")], shapes=SHAPES[:1])
    assert ok.accepted and ok.compile_info.get("kernels"), ok.reasons
    assert not ok.shapes[0].max_abs_err                      # no correctness trial ran
    assert broken.failed_stage == "lint"


def test_the_pool_keeps_gpu_spares_per_kind_and_one_interpreter_spare(monkeypatch):
    """GPU workers keep `gpu_spares` started ahead (their start outlasts a timing-only evaluation);
    interpreter workers one. Spawning is replaced by a recorder: this checks the bookkeeping, not processes."""
    from sandbox.prestart import WorkerPool

    class Fake:
        def __init__(self, interpreter):
            self.interpreter, self.armed, self.closed = interpreter, None, False

        def alive(self):
            return not self.closed

        def arm(self, timeout_s):
            self.armed = timeout_s

        def close(self):
            self.closed = True

    pool = WorkerPool(gpu_spares=3)
    monkeypatch.setattr(pool, "_spawn", lambda interpreter, ns, t: Fake(interpreter))
    first, pre = pool.take(interpreter=False, timeout_s=5.0)
    assert pre is False and len(pool._spares[(False, True)]) == 3
    oldest = pool._spares[(False, True)][0]
    second, pre = pool.take(interpreter=False, timeout_s=5.0)
    assert pre is True and second is oldest and second.armed == 5.0 and len(pool._spares[(False, True)]) == 3
    pool.take(interpreter=True, timeout_s=5.0)
    assert len(pool._spares[(True, True)]) == 1
    waiting = list(pool._spares[(False, True)]) + list(pool._spares[(True, True)])
    waiting[0].closed = True                  # a spare that died while waiting is skipped, never handed out
    third, _ = pool.take(interpreter=False, timeout_s=5.0)
    assert third is waiting[1]
    waiting = list(pool._spares[(False, True)]) + list(pool._spares[(True, True)])
    pool.close()
    assert pool._spares == {} and all(w.closed for w in waiting) and not first.closed and not second.closed
    with pytest.raises(ValueError, match="gpu_spares=0"):
        WorkerPool(gpu_spares=0)


@pytest.mark.parametrize("stages, expected", [(("digest_compile",), "digest_compile"), ((), ""), (None, None)])
def test_a_gpu_spare_is_started_with_the_pools_warm_stages(stages, expected):
    """The pool's gpu_warm_stages reach the spare's command line (sandbox.worker --warm-stages), none: warm_gpu's
    default. A real spawned worker: on a host without a GPU it only skips the warm-up itself."""
    from sandbox.prestart import WorkerPool
    with WorkerPool(gpu_spares=1, gpu_warm_stages=stages) as pool:
        worker, _ = pool.take(interpreter=False, timeout_s=60.0, network_namespace=False)
        try:
            argv = open(f"/proc/{worker.proc.pid}/cmdline", "rb").read().split(b"\0")
            args = [a.decode() for a in argv]
            assert "--warm-cuda" in args
            if expected is None:
                assert "--warm-stages" not in args
            else:
                assert args[args.index("--warm-stages") + 1] == expected
        finally:
            worker.close()
