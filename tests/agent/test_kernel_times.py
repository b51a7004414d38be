"""agent/studies/kernel_times.py on the CPU: its usage errors name what was wrong and exit 2 (the timing itself
needs a GPU and is run by the session batches)."""
import pytest
import torch

from agent.studies import kernel_times


def test_unknown_shapes_and_variants_are_named(capsys):
    assert kernel_times.main(["--op", "top_k_top_p_filter", "--shapes", "B7-V9", "--variants", "nope"]) == 2
    out = capsys.readouterr().out
    assert "B7-V9" in out and "nope" in out and "search_paths" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the call would time kernels")
def test_without_a_gpu_it_says_so_and_exits_2(capsys):
    assert kernel_times.main(["--op", "top_k_top_p_filter", "--shapes", "B2-V151936"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out
