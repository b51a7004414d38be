"""Test session setup: interpreter mode without a GPU, and caches kept out of the user's home.

TRITON_INTERPRET must be set before triton is first imported, so it is decided here from the
presence of an NVIDIA device node, without importing torch or triton.
"""
import os
import tempfile
from pathlib import Path

HAS_NVIDIA = Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()
if not HAS_NVIDIA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

_tmp_home = tempfile.mkdtemp(prefix="aka-test-home-")
os.environ.setdefault("AKA_HOME", str(Path(_tmp_home) / "aka"))
os.environ.setdefault("TRITON_CACHE_DIR", str(Path(_tmp_home) / "triton"))

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if HAS_NVIDIA:
        try:
            import torch
            if torch.cuda.is_available():
                return
        except Exception:
            pass
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200 through the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
