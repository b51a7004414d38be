"""sandbox/worker.py warm_gpu: a stage name it does not know is an error that lists the ones it has, before any
CUDA call (the floor study passes stage names from its command line)."""
import pytest

from sandbox.worker import WARM_STAGES, warm_gpu


def test_an_unknown_stage_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="bogus.*cuda_init"):
        warm_gpu(object(), ["profiler_init", "bogus"])
    assert WARM_STAGES == ("cuda_init", "profiler_init", "digest_compile")
