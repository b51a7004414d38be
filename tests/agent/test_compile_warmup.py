"""The torch.compile warm-up of the studies: which pairs it compiles, and that a failing compile is reported."""
import pytest
import torch

from agent.studies.compile_warmup import pairs, warm
from agent.studies.measure_new_ops import pick_shapes
from benchmarks.registry import load_operator


def test_pairs_are_the_shapes_the_study_times_in_its_order():
    got = pairs(["l2_norm", "softmax"], 2, pick_shapes)
    want = [(op, s.id) for op in ("l2_norm", "softmax") for s in pick_shapes(load_operator(op).shapes, 2)]
    assert got == want and len(got) == 4


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the failure report where no GPU can compile")
def test_a_compile_that_fails_is_reported_not_raised():
    failed = warm(["l2_norm"], 1, 2, pick_shapes)      # the child asks for CUDA inputs on a machine without CUDA
    assert len(failed) == 1 and failed[0].startswith("l2_norm ") and "exit 1" in failed[0]
