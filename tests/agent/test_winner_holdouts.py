"""A run's hold-outs: candidates draw them at the scored shapes' models, a winner is checked once more at every
published shape before it becomes the incumbent (agent/loop.py, acceptance.winner_holdouts). The real sandbox
under the interpreter decides every verdict; the second test's evaluator turns the winner's check into a
failure, as a kernel wrong only at a model no scored shape uses would make it."""
from __future__ import annotations

import dataclasses
import random

import pytest
from test_loop import RecordingProposer, config, iteration_bodies, make_candidates, make_loop

from benchmarks.registry import load_operator
from sandbox import correctness as cx

pytestmark = pytest.mark.interpreter


class RecordingSandbox:
    """The real sandbox; `fail_winner_check` rejects the correctness-only check at every published shape."""

    def __init__(self, fail_winner_check: bool = False):
        from sandbox import evaluate
        self.evaluate, self.fail, self.requests = evaluate, fail_winner_check, []

    def __call__(self, req):
        self.requests.append(req)
        result = self.evaluate(req)
        if self.fail and not req.timing and req.holdout_pool == "all":
            result.reject("correctness", "1 of 4 hidden hold-out shapes failed (a model no scored shape uses)")
        return result


def _run(tmp_path, fail: bool):
    c = make_candidates(tmp_path / "cands")
    sandbox = RecordingSandbox(fail_winner_check=fail)
    loop, audit = make_loop(tmp_path, RecordingProposer([str(c["faster.py"])]), cfg=config(tmp_path, holdout=True),
                            evaluate=sandbox)
    return loop.run(), audit, sandbox


def test_candidates_draw_hold_outs_at_the_scored_models_and_a_winner_is_checked_at_all(tmp_path):
    out, audit, sandbox = _run(tmp_path, fail=False)
    pools = [(r.timing, r.correctness, r.holdout_pool) for r in sandbox.requests]
    assert pools[:2] == [(True, True, "visible"), (True, True, "visible")]      # the seed, the candidate
    assert pools[2] == (False, True, "all")                                       # the winner's check
    body = iteration_bodies(audit)[1]
    assert body["decision"]["accept"] and "every published shape" in body["decision"]["reason"]
    roles = [r.body["role"] for r in audit.records("run-1", "evaluation")]
    assert roles == ["seed", "candidate", "winner_holdouts"]
    assert out.incumbent_sha256 == body["record"]["candidate_hash"]


def test_a_winner_that_fails_the_check_at_every_published_shape_is_not_accepted(tmp_path):
    out, audit, _ = _run(tmp_path, fail=True)
    seed, body = iteration_bodies(audit)[:2]
    assert not body["decision"]["accept"] and body["decision"]["rule"] == "winner-holdouts"
    assert "a model no scored shape uses" in body["decision"]["reason"]
    assert out.incumbent_sha256 == seed["record"]["candidate_hash"]


def test_off_every_candidate_draws_hold_outs_at_every_published_shape(tmp_path):
    c = make_candidates(tmp_path / "cands")
    sandbox = RecordingSandbox()
    cfg = config(tmp_path, "acceptance.winner_holdouts=false", holdout=True)
    loop, _ = make_loop(tmp_path, RecordingProposer([str(c["faster.py"])]), cfg=cfg, evaluate=sandbox)
    loop.run()
    assert [(r.timing, r.holdout_pool) for r in sandbox.requests] == [(True, "all"), (True, "all")]


def test_visible_hold_outs_keep_the_scored_models_and_all_reach_the_others():
    """fused_moe: every hold-out drawn at the scored shapes has one of their (H, E, k) (a ragged I is allowed);
    drawn at all published shapes, over a few draws, they reach models the scored ones do not have."""
    spec = load_operator("fused_moe")
    scored = tuple(s for s in spec.shapes if s.dim["E"] == 256)[:2]
    models = {(s.dim["H"], s.dim["E"], s.dim["k"]) for s in scored}
    for seed in range(5):
        for h in cx.holdout_shapes(spec, random.Random(seed), ["bf16"], at=scored):
            assert (h.dim["H"], h.dim["E"], h.dim["k"]) in models
    reached = {(h.dim["H"], h.dim["E"], h.dim["k"]) for seed in range(5)
               for h in cx.holdout_shapes(spec, random.Random(seed), ["bf16"])}
    assert reached - models


def test_an_unknown_hold_out_pool_is_a_usage_error():
    from benchmarks.hardware import load_hardware
    from sandbox.evaluation import EvalRequest, evaluate
    spec = load_operator("rms_norm")
    req = EvalRequest(op="rms_norm", source="x = 1\n", shapes=spec.shapes[:1], hardware=load_hardware("h200"))
    with pytest.raises(ValueError, match="holdout_pool='hot'"):
        evaluate(dataclasses.replace(req, holdout_pool="hot"))
