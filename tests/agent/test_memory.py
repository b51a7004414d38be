"""Memory, optimization dropout, lessons and hold-out redaction (agent/memory.py)."""
import dataclasses

import pytest

from agent.memory import Memory, lesson, redact_holdout, visible_per_shape
from agent.types import IterationRecord
from sandbox.verdict import EvalResult, ShapeResult


def rec(i, accepted=False, seed=False):
    return IterationRecord(iteration=i, candidate_hash=f"{i:064x}", changed=f"change {i}", why="", verdict=
                           "accepted" if accepted else "rejected", failed_stage=None if accepted else "correctness",
                           score=0.1 * i if accepted else None, lesson=f"lesson {i}", is_seed=seed, accepted=accepted)


def make_memory():
    # seed 0, accepted at 3, everything else rejected; latest is 9
    return Memory([rec(0, accepted=True, seed=True)] + [rec(i, accepted=(i == 3)) for i in range(1, 10)])


def test_dropout_masks_round_p_of_the_eligible_and_never_the_protected():
    m = make_memory()
    assert m.protected() == (0, 3, 9)
    ev = m.dropout(iteration=10, p=0.5, rng_seed=42)
    assert ev.eligible == 7                          # 1, 2, 4, 5, 6, 7, 8
    assert len(ev.masked) == 4                       # round(0.5 * 7)
    assert not set(ev.masked) & {0, 3, 9}
    shown = {r.iteration for r in m.visible()}
    assert shown == set(range(10)) - set(ev.masked)
    assert {0, 3, 9} <= shown


def test_dropout_is_reproducible_from_its_seed_and_varies_with_it():
    a, b, c = make_memory(), make_memory(), make_memory()
    assert a.dropout(10, 0.5, 7).masked == b.dropout(10, 0.5, 7).masked
    seeds = {make_memory().dropout(10, 0.5, s).masked for s in range(20)}
    assert len(seeds) > 1


def test_masks_accumulate_and_a_later_dropout_picks_only_from_unmasked():
    m = make_memory()
    first = m.dropout(10, 0.5, 1)
    m.add(rec(10))
    second = m.dropout(11, 0.5, 2)
    assert not set(first.masked) & set(second.masked)
    assert m.masked_iterations == frozenset(first.masked) | frozenset(second.masked)
    assert 10 in second.protected                    # the new latest record


def test_p_zero_masks_nothing_and_p_one_is_refused():
    m = make_memory()
    assert m.dropout(10, 0.0, 1).masked == ()
    with pytest.raises(ValueError, match="dropout p=1.0"):
        m.dropout(10, 1.0, 1)


def test_summary_counts_but_does_not_list_masked_records():
    m = make_memory()
    ev = m.dropout(10, 0.5, 3)
    text = m.summary()
    assert "10 iterations" in text and "1 candidates accepted" in text
    assert f"{len(ev.masked)} older records were set aside" in text
    for i in ev.masked:
        assert f"lesson {i}" not in text and f"change {i}" not in text


def shape(id, T, H, holdout=False, error=None, att=None, rel=None):
    return ShapeResult(id=id, dims={"T": T, "H": H}, dtype="fp32", weight=0.0 if holdout else 1.0,
                       attainment=att, holdout=holdout, error=error, max_rel_err=rel)


def test_redaction_drops_holdout_rows_and_any_text_naming_their_dims():
    r = EvalResult(op="rms_norm", verdict="rejected", failed_stage="correctness",
                   reasons=["shape holdout-2 (T=37, H=4099): max_rel_err 3.1", "v1 ok", "output (37, 4099) wrong"],
                   shapes=[shape("v1", 4, 256, att=0.5), shape("holdout-2", 37, 4099, holdout=True,
                                                                error="mismatch", rel=3.1)],
                   stderr_tail="Traceback ... x.shape=(37, 4099)")
    red = redact_holdout(r)
    assert [s.id for s in red.shapes] == ["v1"]
    text = " ".join(red.reasons + red.flags) + red.stderr_tail
    assert "37" not in text and "4099" not in text and "holdout-2" not in text
    assert "v1 ok" in red.reasons
    assert any("a hidden shape" in x and "max_rel_err 3.1" in x for x in red.reasons)
    assert "1 hidden shapes checked, 1 failed" in red.flags
    assert len(r.shapes) == 2 and "37" in r.reasons[0]          # the original is untouched


def test_redaction_keeps_numbers_that_visible_shapes_share():
    r = EvalResult(op="x", reasons=["H=256 is too wide"], shapes=[shape("v", 4, 256), shape("h", 3, 256, holdout=True)])
    assert redact_holdout(r).reasons == ["H=256 is too wide"]


def test_lesson_for_a_hidden_shape_says_a_hidden_shape():
    r = EvalResult(op="x", verdict="rejected", failed_stage="correctness",
                   shapes=[shape("v", 4, 256, att=0.2), shape("h", 37, 4099, holdout=True, error="bad", rel=3.1)])
    text = lesson(r, accepted=False)
    assert text == "rejected at correctness: a hidden shape: max_rel_err 3.1"


def test_lesson_for_a_visible_shape_names_it():
    r = EvalResult(op="x", verdict="rejected", failed_stage="correctness",
                   shapes=[shape("decode-1", 4, 256, error="mismatch", rel=0.25)])
    assert lesson(r, accepted=False) == "rejected at correctness: max_rel_err 0.25 on decode-1 (T=4 H=256)"


def test_lesson_for_lint_uses_the_reason_and_for_accepted_the_decision():
    r = EvalResult(op="x", verdict="rejected", failed_stage="lint", reasons=["torch.matmul computes the result"])
    assert lesson(r, accepted=False) == "rejected at lint: torch.matmul computes the result"
    ok = EvalResult(op="x", verdict="accepted")
    assert lesson(ok, accepted=True, decision="score 0.4 -> 0.5") == "accepted: score 0.4 -> 0.5"
    assert lesson(ok, accepted=False, decision="gain +0.001 <= noise 0.01").startswith("passed every gate but kept")
    assert lesson(None, accepted=False, error="HTTP 529 overloaded") == "no candidate: HTTP 529 overloaded"


def test_visible_per_shape_counts_failures_as_zero_and_skips_hidden():
    r = EvalResult(op="x", shapes=[shape("a", 1, 8, att=0.7), shape("b", 1, 8, error="boom"),
                                   shape("h", 3, 9, holdout=True, att=0.9)])
    assert visible_per_shape(r) == {"a": 0.7, "b": 0.0}


def test_records_are_frozen_values():
    r = rec(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.lesson = "edited"
