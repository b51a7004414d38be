"""The GPU budget's forecast stop: a run does not start a round the budget cannot hold."""
from agent.budget import gpu_forecast_stop


def test_stops_when_less_than_half_a_typical_round_is_left():
    rounds = [100.0, 110.0, 120.0]            # median 110 s
    assert gpu_forecast_stop(4.5, 270 - 54, rounds) is not None     # 54 s left < 55
    why = gpu_forecast_stop(4.5, 270 - 54, rounds)
    assert "0.90 of 4.5 left" in why and "1.83 GPU-minutes" in why
    assert gpu_forecast_stop(4.5, 270 - 56, rounds) is None         # 56 s left: the round may fit, start it


def test_needs_two_rounds_and_a_gpu_budget_and_leaves_an_exhausted_budget_to_the_plain_check():
    assert gpu_forecast_stop(4.5, 260.0, [100.0]) is None
    assert gpu_forecast_stop(None, 260.0, [100.0, 100.0]) is None
    assert gpu_forecast_stop(4.5, 280.0, [100.0, 100.0]) is None     # over: exhausted() says so
