"""agent/studies/kernel_times.py on the CPU: its usage errors name what was wrong and exit 2 (the timing itself
needs a GPU and is run by the session batches)."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agent.studies import kernel_times
from benchmarks.registry import list_operators

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_shapes_and_variants_are_named(capsys):
    assert kernel_times.main(["--op", "top_k_top_p_filter", "--shapes", "B7-V9", "--variants", "nope"]) == 2
    out = capsys.readouterr().out
    assert "B7-V9" in out and "nope" in out and "search_paths" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the call would time kernels")
def test_without_a_gpu_it_says_so_and_exits_2(capsys):
    assert kernel_times.main(["--op", "top_k_top_p_filter", "--shapes", "B2-V151936"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


def test_an_unknown_op_is_one_line_naming_it_and_the_known_ops_with_exit_2():
    run = subprocess.run([sys.executable, "-m", "agent.studies.kernel_times", "--op", "NOT_AN_OP"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "unknown operator 'NOT_AN_OP'" in run.stderr
    assert f"known operators: {', '.join(list_operators())}" in run.stderr
