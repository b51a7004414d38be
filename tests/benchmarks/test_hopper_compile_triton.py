"""hopper_compile's compiler: this Python's Triton by default; the interpreter AKA_DEVICE_TRITON_PYTHON names when set
(`make device-triton` builds one with the GPU machine's Triton: on 2026-12-06 its ptxas built a kernel with a stack
that the local one built without); a clear error when that names no interpreter."""
import os
import subprocess
import sys
from pathlib import Path

import hopper_compile
import pytest

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
DEVICE_PYTHON = ROOT / ".venv-device-triton" / "bin" / "python"
L2_NORM = [{"kernel": "_l2_norm_kernel", "types": {"x_ptr": "*bf16", "y_ptr": "*bf16"},
            "constexprs": dict(stride_x_col=1, ROWS=1, BLOCK_H=2048, NUM_CHUNKS=1, USE_PDL=False),
            "aligned": ["x_ptr", "y_ptr"], "num_warps": 8, "num_stages": 1}]


def _version(python: str) -> str:
    return subprocess.run([python, "-c", "import triton; print(triton.__version__)"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_by_default_this_pythons_triton_compiles(monkeypatch):
    monkeypatch.delenv("AKA_DEVICE_TRITON_PYTHON", raising=False)
    [r] = hopper_compile.compile_for_hopper(load_operator("l2_norm").seed_path, L2_NORM)
    assert r["triton"] == _version(sys.executable) and "REG:" in r["usage"]


def test_a_device_python_that_is_not_there_is_named_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("AKA_DEVICE_TRITON_PYTHON", str(tmp_path / "nope" / "python"))
    with pytest.raises(AssertionError, match=r"AKA_DEVICE_TRITON_PYTHON=.*nope.*make device-triton"):
        hopper_compile.compile_for_hopper(load_operator("l2_norm").seed_path, L2_NORM)


@pytest.mark.skipif(not os.access(DEVICE_PYTHON, os.X_OK), reason="no .venv-device-triton (make device-triton)")
def test_the_device_python_compiles_with_its_own_triton(monkeypatch):
    monkeypatch.setenv("AKA_DEVICE_TRITON_PYTHON", str(DEVICE_PYTHON))
    [r] = hopper_compile.compile_for_hopper(load_operator("l2_norm").seed_path, L2_NORM)
    assert r["triton"] == _version(str(DEVICE_PYTHON)) and "REG:" in r["usage"]
