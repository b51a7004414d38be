"""run_report: candidates per GPU-minute and stage times from an audit trail's records."""
from agent.studies.run_report import compact_records, summarize


def _ev(role, it, gpu, stages=(), sha="s"):
    return {"role": role, "iteration": it, "gpu_s": gpu, "source_sha256": f"{sha}{it}",
            "result": {"verdict": "accepted", "failed_stage": None, "stage_times": list(stages)}}


def test_a_candidate_counts_once_and_the_start_is_left_out_of_the_after_start_rate():
    evals = [_ev("seed", 0, 20.0), _ev("baseline:compile", 0, 10.0), _ev("screen_incumbent", 1, 2.0),
             _ev("screen", 1, 3.0, [("compile.first_run", 1.0), ("floor", 0.3)]),
             _ev("candidate", 1, 7.0, [("correctness", 2.0)]),       # the same candidate, fully evaluated
             _ev("screen", 2, 3.0, [("compile.first_run", 2.0)])]
    iters = [{"iteration": 0, "is_seed": True, "score": 0.5, "accepted": True},
             {"iteration": 1, "verdict": "accepted", "accepted": True},
             {"iteration": 2, "verdict": "rejected", "failed_stage": "acceptance", "accepted": False}]
    r = summarize(evals, iters, {"gpu_s": 45.0})
    assert r["candidates"] == 2 and r["candidate_evaluations"] == 3
    assert r["candidates_per_gpu_minute_whole_run"] == round(60 * 2 / 45.0, 2)
    assert r["candidates_per_gpu_minute_after_start"] == round(60 * 2 / 15.0, 2)   # 45 - seed 20 - baseline 10
    assert r["accepted"] == 1 and r["verdicts"] == {"accepted": 1, "rejected@acceptance": 1}
    assert r["stage_median_s"]["screen"] == {"compile.first_run": 1.5, "floor": 0.15}   # absent counts 0
    assert r["score_start"] == 0.5


def test_compact_records_keep_roles_times_and_verdicts_without_result_bodies():
    out = compact_records([_ev("screen", 1, 3.14159, [("dsl", 0.2)])],
                          [{"iteration": 1, "verdict": "rejected", "lesson": "slower", "extra": "x"}])
    assert out["evaluations"] == [{"iteration": 1, "role": "screen", "verdict": "accepted", "failed_stage": None,
                                   "gpu_s": 3.142, "stage_s": {"dsl": 0.2}}]
    assert out["iterations"][0]["lesson"] == "slower" and "extra" not in out["iterations"][0]
