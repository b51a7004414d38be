"""The exported standalone test (agent/audit_export.render_test_file) for operators of the multi-output contract:
tuples of outputs, arguments written in place, integer outputs and an operator's `check` (the tiny operators of
tests/sandbox/multiout_operators.py). It must pass the right kernels and fail each wrong one."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from agent.audit_export import render_test_file, standalone_reference

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("multiout_operators", HERE.parent / "sandbox" / "multiout_operators.py")
OPS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(OPS)

# Plain PyTorch stand-ins for exported kernels: the standalone test only calls the function.
RIGHT = {
    "sum_diff_sign": "def sum_diff_sign(x, y):\n    s = x + y\n    return s, x - y, (s > 0).to(torch.int32)\n",
    "scatter_rows": ("def scatter_rows(x, cache, slots):\n    for t in range(x.shape[0]):\n        if int(slots[t]) >= 0:\n"
                     "            cache[int(slots[t])] = x[t]\n"),
    "stable_rank": "def stable_rank(keys):\n    return (torch.sort(keys).indices,)\n",
}
WRONG = {
    "sum_diff_sign": "def sum_diff_sign(x, y):\n    s = x + y\n    return s, x - y, (s > -0.3).to(torch.int32)\n",
    "scatter_rows": ("def scatter_rows(x, cache, slots):\n    cache[-1] = 0.0\n    for t in range(x.shape[0]):\n"
                     "        if int(slots[t]) >= 0:\n            cache[int(slots[t])] = x[t]\n"),
    "stable_rank": "def stable_rank(keys):\n    return (torch.zeros_like(keys, dtype=torch.int64),)\n",
}
SHAPES = {"sum_diff_sign": {"N": 40}, "scatter_rows": {"T": 6, "D": 16, "S": 32}, "stable_rank": {"N": 24}}


def _bundle(root: Path, kernels: dict[str, str]) -> Path:
    root.mkdir()
    for op, text in OPS.OPERATORS.items():
        (root / f"reference_{op}.py").write_text(standalone_reference(text))
        (root / f"{op}.py").write_text("import torch\n\n\n" + kernels[op])
        (root / f"test_{op}.py").write_text(render_test_file(op, "run-x", [{"id": "s0", "dims": SHAPES[op],
                                                                          "dtype": "fp32"}]))
    return root


def _pytest(folder: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                          capture_output=True, text=True, timeout=300, cwd=folder)
    return proc.stdout + proc.stderr


def test_the_exported_test_passes_right_kernels_of_every_operator_form(tmp_path):
    out = _pytest(_bundle(tmp_path / "right", RIGHT))
    assert " passed" in out and "failed" not in out, out[-3000:]


def test_the_exported_test_fails_a_wrong_integer_output_an_untouched_slot_written_and_an_invalid_order(tmp_path):
    out = _pytest(_bundle(tmp_path / "wrong", WRONG))
    for op in OPS.OPERATORS:
        assert f"FAILED test_{op}.py::test_run_shapes" in out, (op, out[-3000:])
    assert "integer output differs" in out and "cache: elementwise tolerance exceeded" in out
    assert "not a permutation" in out
