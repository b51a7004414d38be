"""agent/studies/topk_search_probe.py on the CPU: its usage errors name what was wrong and exit 2 (the probe
itself needs a GPU and runs in the session batches)."""
from agent.studies import topk_search_probe


def test_an_unknown_shape_or_variant_is_named_with_the_choices(capsys):
    assert topk_search_probe.main(["--shape", "B3-V7"]) == 2
    err = capsys.readouterr().err
    assert "unknown shape 'B3-V7'" in err and "B256-V151936" in err and "bins_eighth" in err
    assert topk_search_probe.main(["--variants", "bins_eighth,nope"]) == 2
    assert "['nope']" in capsys.readouterr().err


def test_without_a_gpu_it_says_so_and_exits_2(capsys):
    assert topk_search_probe.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
