"""sandbox/interpreter_compat.py: Triton 3.6's interpreter converts a kernel scalar (a one-element array) to an
int as Triton 3.7's does, so a loop bounded by a runtime value runs under a recent NumPy (2.4.6 here).

The patch runs here on this venv's Triton. With AKA_DEVICE_TRITON_PYTHON (`make device-triton`: the GPU
machine's Triton 3.6 beside this NumPy) a child run shows the failure without it and the run with it."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sandbox import interpreter_compat

REPO = Path(__file__).resolve().parents[2]

# A loop whose bounds are a program id and a value loaded from memory, as softmax's chunks and top_k's rows
# are: the interpreter turns both into Python ints.
KERNEL = textwrap.dedent('''
    import os
    os.environ["TRITON_INTERPRET"] = "1"
    import sys
    import torch
    import triton
    import triton.language as tl
    if sys.argv[1] == "patched":
        from sandbox import interpreter_compat
        from triton.runtime import interpreter
        assert interpreter_compat.apply() and interpreter_compat.apply()      # a second call changes nothing
        assert interpreter._patch_lang_tensor.squeezes_index and \
            interpreter._patch_lang_tensor.__closure__[0].cell_contents.__name__ == "_patch_lang_tensor"

    @triton.jit
    def _sum_kernel(x_ptr, n_ptr, out_ptr):
        start = tl.program_id(0)
        acc = tl.zeros([], dtype=tl.float32)
        for i in range(start, tl.load(n_ptr)):
            acc += tl.load(x_ptr + i)
        tl.store(out_ptr + start, acc)

    x = torch.arange(8, dtype=torch.float32)
    out = torch.empty(3)
    _sum_kernel[(3,)](x, torch.tensor([8], dtype=torch.int32), out)
    print(out.tolist())
''')


def _run(python: str, mode: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([python, "-c", KERNEL, mode], capture_output=True, text=True, env=env, timeout=300)


def test_the_index_of_a_one_element_array_is_its_value():
    class Handle:
        def __init__(self, data):
            self.data = data

    class Scalar:
        def __init__(self, data):
            self.handle = Handle(data)

    assert interpreter_compat._index(Scalar(np.array([5], dtype=np.int32))) == 5
    assert interpreter_compat._index(Scalar(np.array([[7]], dtype=np.int64))) == 7
    with pytest.raises(TypeError):           # a block is no index, as before
        interpreter_compat._index(Scalar(np.array([1, 2])))


def test_the_patch_is_installed_once_and_this_triton_still_runs_a_runtime_loop_bound():
    proc = _run(sys.executable, "patched")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[28.0, 28.0, 27.0]"


@pytest.mark.skipif(not os.environ.get("AKA_DEVICE_TRITON_PYTHON"),
                    reason="needs the GPU machine's Triton 3.6 (make device-triton; AKA_DEVICE_TRITON_PYTHON)")
def test_triton_3_6_fails_without_the_patch_and_runs_with_it():
    python = os.environ["AKA_DEVICE_TRITON_PYTHON"]
    bare = _run(python, "bare")
    assert bare.returncode != 0 and "only 0-dimensional arrays" in bare.stderr, (bare.stdout, bare.stderr[-2000:])
    patched = _run(python, "patched")
    assert patched.returncode == 0, patched.stderr[-2000:]
    assert patched.stdout.strip().splitlines()[-1] == "[28.0, 28.0, 27.0]"


@pytest.mark.skipif(not os.environ.get("AKA_DEVICE_TRITON_PYTHON"),
                    reason="needs the GPU machine's Triton 3.6 (make device-triton; AKA_DEVICE_TRITON_PYTHON)")
def test_the_sandbox_interpreter_worker_runs_softmax_under_triton_3_6():
    """The search's compile check (the sandbox's interpreter worker at a tiny shape) on the softmax seed, which
    failed on every GPU machine before the worker applied the patch."""
    check = textwrap.dedent('''
        from agent.proposers.search_prefetch import sandbox_compile_check
        from benchmarks.registry import load_operator
        c = sandbox_compile_check(open(load_operator("softmax").seed_path).read(), "softmax")
        print(c.ok, c.compiled, c.error[:300])
    ''')
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([os.environ["AKA_DEVICE_TRITON_PYTHON"], "-c", check], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1].startswith("True True"), proc.stdout
