"""The parent and the worker draw a trial's inputs from one seed; the digests after the call tell a candidate that
wrote into its inputs. On the CPU the worker also sends the digests from before the call, so inputs that already
differed (an input maker that is not deterministic across processes) are named as aka's error, not blamed on
the candidate."""
from types import SimpleNamespace

from benchmarks.registry import load_operator
from sandbox import results
from sandbox.correctness import input_digests
from sandbox.evaluation import _Evaluation


def _judge(before: dict, after: dict, expected: dict) -> str | None:
    fake = SimpleNamespace(in_holdout=False, spec=load_operator("rms_norm"))
    exp = results.Expected(digests=expected, results=[], parts=[])
    return _Evaluation._check_trial(fake, {"digests_before": before, "digests": after}, b"", exp, "fp32", None)


def test_inputs_that_differed_before_the_call_are_akas_error():
    reason = _judge({"x": "drawn-else", "weight": "w"}, {"x": "drawn-else", "weight": "w"}, {"x": "x0", "weight": "w"})
    assert reason.startswith("aka error, not the candidate's") and "input(s) x " in reason
    assert "rms_norm's make_inputs" in reason


def test_inputs_written_during_the_call_are_the_candidates():
    reason = _judge({"x": "x0", "weight": "w"}, {"x": "written", "weight": "w"}, {"x": "x0", "weight": "w"})
    assert "changed during the call" in reason and "aka error" not in reason


def test_one_seed_draws_the_same_digests_and_one_changed_value_shows():
    """What the comparison rests on: the same seed draws the same bytes (here twice in one process), and a
    single changed element changes that input's digest."""
    spec = load_operator("moe_topk_softmax")
    dims = {"T": 1, "E": 128, "k": 8}
    a, b = spec.make_inputs(dims, "bf16", 5), spec.make_inputs(dims, "bf16", 5)
    assert input_digests(a, 5) == input_digests(b, 5)
    b["logits"][0, 0] += 1
    assert input_digests(a, 5)["logits"] != input_digests(b, 5)["logits"]
