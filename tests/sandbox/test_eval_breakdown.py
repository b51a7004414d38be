"""The CPU-runnable parts of sandbox/studies/eval_breakdown.py: cold/warm summary and the report."""
import pytest


def _study():
    from sandbox.studies import eval_breakdown     # a package module too: importing it runs no study
    return eval_breakdown


def test_cold_is_the_first_evaluation_and_warm_the_median_of_the_rest():
    study = _study()
    runs = [{"wall_s": 30.0, "verdict": "accepted", "stage_times": [["imports", 5.0], ["correctness", 9.0]]},
            {"wall_s": 8.0, "verdict": "accepted", "stage_times": [["worker_wait", 0.1], ["correctness", 4.0]]},
            {"wall_s": 6.0, "verdict": "accepted", "stage_times": [["worker_wait", 0.3], ["correctness", 2.0]]}]
    s = study.summarize(runs)
    assert s["cold_wall_s"] == 30.0 and s["warm_wall_s"] == pytest.approx(7.0)
    assert s["warm_stages_s"] == {"worker_wait": pytest.approx(0.2), "correctness": pytest.approx(3.0)}
    text = study.markdown({"mode": "speed-ups on", "n": 3, "shape_set": "hot", "command": "x", "gpu": "H200",
                           "ops": {"rms_norm": s}})
    assert "| rms_norm | 30.0 | 7.0 | 8.0 |" in text and "| correctness | 3.000 |" in text


def test_slow_mode_turns_every_speed_up_off():
    slow, fast = _study().settings_for(True), _study().settings_for(False)
    assert (slow.prestart, slow.compile_cache, slow.compile_in_worker, slow.holdout_trials) == (False, False, False, 3)
    assert (fast.prestart, fast.compile_cache, fast.compile_in_worker, fast.holdout_trials) == (True, True, True, 1)
