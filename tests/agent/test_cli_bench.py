"""`aka bench` usage errors for --baseline and --require: exit 2 with the value, what applies, and no traceback.
Run as a real subprocess (python -m agent.cli), as a user or a script would."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "agent.cli", "bench", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, expected", [
    (("--op", "gemm", "--baseline", "liger"), "nothing for gemm: this operator offers eager, compile, cublas"),
    (("--op", "rms_norm", "--baseline", "cublas"), "offers eager, compile, liger"),
    (("--op", "rms_norm", "--baseline", "fastest"), "is not one of eager, compile, liger, cublas"),
    (("--op", "gemm", "--require", "hgmma"), "--require hgmma: not a feature the compile gate reads; choose from wgmma"),
    (("--op", "gemm", "--baseline", "cublas", "--require", "wgmma"), "baselines are not compiled by the gate"),
])
def test_bench_usage_errors(args, expected):
    proc = bench(*args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in " ".join(proc.stderr.split()), proc.stderr
    assert "Traceback" not in proc.stderr
