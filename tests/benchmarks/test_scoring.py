import math

import pytest

from benchmarks.scoring import (EmptyShapeSet, aggregate, normalize, operator_score, score_shape,
                                t_ref, weighted_attainment)


def test_attainment_is_reference_over_measured():
    s = score_shape("a", 1.0, t_s=4e-6, t_roof_s=2e-6, t_floor_s=1e-6)
    assert s.attainment == pytest.approx(0.5)
    assert not s.suspect and not s.failed


def test_floor_replaces_a_tiny_roofline():
    # T_roof 0.01 us is below the 1.09 us floor: the floor is the reference.
    s = score_shape("tiny", 1.0, t_s=2.18e-6, t_roof_s=1e-8, t_floor_s=1.09e-6)
    assert s.attainment == pytest.approx(0.5)
    assert t_ref(1e-8, 1.09e-6) == 1.09e-6


def test_attainment_above_one_is_capped_and_flagged():
    s = score_shape("fast", 1.0, t_s=1e-6, t_roof_s=3e-6, t_floor_s=0.5e-6)
    assert s.attainment == 1.0
    assert s.suspect and s.raw_ratio == pytest.approx(3.0)


def test_failed_shape_counts_zero_in_the_median():
    ok = [score_shape(str(i), 1.0, 2e-6, 1e-6, 0.0) for i in range(2)]        # 0.5 each
    failed = [score_shape("f1", 1.0, None, 1e-6, 0.0), score_shape("f2", 1.0, None, 1e-6, 0.0)]
    assert failed[0].attainment == 0.0 and failed[0].failed
    assert operator_score(ok + failed[:1]) == pytest.approx(0.5)   # median of (0, .5, .5)
    assert operator_score(ok + failed) == pytest.approx(0.25)      # median of (0, 0, .5, .5)


def test_median_not_mean():
    scores = [score_shape(str(i), 1.0, 1e-6 / a, 1e-6, 0.0) for i, a in enumerate((0.1, 0.2, 0.9))]
    assert operator_score(scores) == pytest.approx(0.2)
    assert weighted_attainment(scores) == pytest.approx(0.4)


def test_weighted_attainment_uses_weights():
    a = score_shape("a", 3.0, 1e-6, 1e-6, 0.0)     # 1.0
    b = score_shape("b", 1.0, 4e-6, 1e-6, 0.0)     # 0.25
    assert weighted_attainment([a, b]) == pytest.approx((3 * 1.0 + 0.25) / 4)


def test_empty_set_is_an_error_that_says_what_to_do():
    with pytest.raises(EmptyShapeSet, match="--shape-set"):
        operator_score([])
    with pytest.raises(EmptyShapeSet):
        aggregate({}, {})


def test_aggregate_normalizes_operator_weights():
    s = aggregate({"a": 0.5, "b": 1.0}, {"a": 0.3, "b": 0.1})
    assert s == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)
    assert math.isclose(sum(normalize({"x": 2, "y": 6}).values()), 1.0)


def test_nonpositive_time_is_a_harness_error():
    with pytest.raises(ValueError, match="not positive"):
        score_shape("z", 1.0, 0.0, 1e-6, 0.0)
