"""The runtime gates of issue 10 on the CPU: the read-only-input call (input-write rule), the evidence behind
the stale-cache hint, and libdevice as an interpreter limitation. A tiny operator (out = 2x + y) keeps
each evaluation to a few seconds under the interpreter; the GPU halves are in test_gpu_sandbox.py.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elementwise_operator import elementwise_operator
from sandbox_requests import make_request

from benchmarks.spec import Shape
from sandbox import correctness as cx
from sandbox.evaluation import evaluate, evaluate_unlinted
from sandbox.trial_evidence import INPUT_WRITE_RULE, interpreter_limitation

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

OPERATOR = elementwise_operator("twice_add", holdout_n="33")

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _twice_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    out = 2.0 * x + y
    #KERNEL
    tl.store(out_ptr + offs, out, mask=mask)


def twice_add(x, y):
    n = x.numel()
    #LAUNCHER
    out = torch.empty_like(x)
    _twice_add_kernel[(1,)](x, y, out, n, BLOCK=64)
    return out
'''

SHAPE = Shape.make("s0", {"N": 40}, dtype="bf16")


def candidate(kernel: str = "", launcher: str = "", head: str = "") -> str:
    src = KERNEL.replace("    #KERNEL", "\n".join("    " + ln for ln in kernel.strip().splitlines()) or "    pass")
    src = src.replace("    #LAUNCHER", "\n".join("    " + ln for ln in launcher.strip().splitlines()) or "    pass")
    return src.replace("import triton.language as tl\n", "import triton.language as tl\n" + head + "\n", 1)


@pytest.fixture(scope="module")
def op_dir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("ops")
    (root / "twice_add").mkdir()
    (root / "twice_add" / "operator.py").write_text(OPERATOR)
    return str(root)


def run(source: str, op_dir: str, **kw):
    kw.setdefault("holdout", False)
    req = make_request("twice_add", source, (SHAPE,), trials=2, timeout_s=120.0, interpreter=True, **kw)
    return evaluate_unlinted(req, operator_dir=op_dir)


# ---- the read-only copies themselves -------------------------------------------------------------
def test_guarded_inputs_keep_values_and_layout_and_make_any_write_fault():
    import torch

    from sandbox.input_guard import guarded_inputs
    x = torch.randn(6, 8)[:, 1::2]
    g, how = guarded_inputs({"x": x, "eps": 1e-6})
    assert how == "mprotect" and g["eps"] == 1e-6
    assert torch.equal(g["x"], x) and g["x"].stride() == x.stride() and g["x"].storage_offset() == x.storage_offset()
    assert g["x"].data_ptr() != x.data_ptr()
    write = ("import torch; from sandbox.input_guard import guarded_inputs; "
             "g, _ = guarded_inputs({'x': torch.ones(1000)}); print(float(g['x'].sum()), flush=True); g['x'].add_(1)")
    proc = subprocess.run([sys.executable, "-c", write], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.stdout.strip() == "1000.0", proc.stderr      # reading works
    assert proc.returncode == -11, (proc.returncode, proc.stderr)  # writing is a SIGSEGV


# ---- item 4: writes into inputs during the call --------------------------------------------------
@pytest.mark.interpreter
def test_a_kernel_that_uses_an_input_as_scratch_and_restores_it_is_rejected_naming_the_rule(op_dir):
    honest = run(candidate(), op_dir)
    assert honest.accepted, honest.reasons
    scratch = candidate(kernel="tl.store(x_ptr + offs, out, mask=mask)\ntl.store(x_ptr + offs, x, mask=mask)")
    res = run(scratch, op_dir)
    assert res.failed_stage == "correctness" and res.reasons[0].startswith(INPUT_WRITE_RULE), res.reasons
    assert "read-only-input call of shape s0" in res.reasons[0]


@pytest.mark.interpreter
def test_a_launcher_that_writes_an_input_with_torch_and_undoes_it_is_rejected_naming_the_rule(op_dir):
    res = run(candidate(launcher="x.mul_(2.0)\nx.div_(2.0)"), op_dir)
    assert res.failed_stage == "correctness" and res.reasons[0].startswith(INPUT_WRITE_RULE), res.reasons


# ---- item 10: the stale-cache hint only with evidence --------------------------------------------
@pytest.mark.interpreter
def test_a_result_returned_again_for_new_values_is_named_as_an_earlier_trials_result(op_dir):
    # call 1 is the compile gate's run, call 2 trial 1; from call 3 on, the last result for this size
    cache = candidate(head="_BY_SIZE = {}\n_CALLS = []",
                      launcher="_CALLS.append(n)\nif len(_CALLS) > 2:\n    return _BY_SIZE[n]").replace(
        "    return out\n", "    _BY_SIZE[n] = out\n    return out\n")
    res = run(cache, op_dir)
    assert res.failed_stage == "correctness", res.reasons
    assert "trial 2 of 2" in res.reasons[0] and "the output is trial 1's result" in res.reasons[0], res.reasons


ID_CACHE = '''
import torch
import triton
import triton.language as tl

_TWICE = {}


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


def twice_add(x, y):
    n = x.numel()
    if id(x) not in _TWICE:            # 2*x cached by the input tensor's identity
        t = torch.empty_like(x)
        _scale_kernel[(1,)](x, t, n, BLOCK=64)
        _TWICE[id(x)] = (x, t)
    out = torch.empty_like(x)
    _add_kernel[(1,)](_TWICE[id(x)][1], y, out, n, BLOCK=64)
    return out
'''


@pytest.mark.interpreter
def test_state_keyed_by_the_buffers_is_named_when_fresh_buffers_pass(op_dir):
    res = run(ID_CACHE, op_dir)
    assert res.failed_stage == "correctness", res.reasons
    assert "pass in freshly allocated buffers" in res.reasons[0], res.reasons


def _seed_where_only_the_second_trial_has_a_positive_first_x(op_dir) -> int:
    spec = cx.load_spec("twice_add", op_dir)
    for base in range(1000):
        firsts = [float(spec.make_inputs({"N": 40}, "fp32", cx.derive_seed(base, "check", "s0", t))["x"][0])
                  for t in range(2)]
        if firsts[0] <= 0 < firsts[1]:
            return base
    raise AssertionError("no seed found")


@pytest.mark.interpreter
def test_a_data_dependent_failure_in_a_later_trial_gets_no_stale_cache_hint(op_dir):
    nan_on_positive_first = candidate(kernel="out = tl.where((offs == 0) & (x > 0), float('nan'), out)")
    res = run(nan_on_positive_first, op_dir, seed=_seed_where_only_the_second_trial_has_a_positive_first_x(op_dir))
    assert res.failed_stage == "correctness", res.reasons
    text = res.reasons[0]
    assert "trial 2 of 2" in text and "fail again in freshly allocated buffers" in text, text
    assert "stale" not in text and "cached by pointer" not in text, text


# ---- item 9: libdevice under the interpreter -----------------------------------------------------
def test_interpreter_limitation_needs_the_interpreter_an_interpreter_error_and_libdevice():
    src = "from triton.language.extra import libdevice\n"
    assert "interpreter limitation" in interpreter_limitation(src, "InterpreterError", True)
    assert interpreter_limitation(src, "InterpreterError", False) is None
    assert interpreter_limitation(src, "ValueError", True) is None
    assert interpreter_limitation("import triton\n", "InterpreterError", True) is None


@pytest.mark.interpreter
def test_a_libdevice_kernel_on_the_cpu_is_marked_an_interpreter_limitation_not_a_fault():
    from benchmarks.registry import load_operator
    from sandbox.corpus import parse_header, visible_shapes
    path = HERE / "honest" / "rms_norm_libdevice_rsqrt.py"
    source = path.read_text()
    spec = load_operator("rms_norm")
    res = evaluate(make_request("rms_norm", source, visible_shapes(spec, parse_header(source)), trials=1,
                                holdout=False, interpreter=True, timing=False, timeout_s=120.0))
    assert not res.accepted and res.interpreter_limitation, res.reasons
    assert "libdevice" in res.interpreter_limitation and "not a fault of the candidate" in res.reasons[0]
    assert res.to_json()["interpreter_limitation"] == res.interpreter_limitation
