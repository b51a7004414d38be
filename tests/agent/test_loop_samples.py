"""`--samples N`: a round evaluates every distinct sample and takes only the best to acceptance; the LLM
path runs through the real client code against a local HTTP server (tests/agent/fake_llm_server.py)."""
from __future__ import annotations

import pytest
from fake_llm_server import FakeLLMServer, Scripted
from test_loop import RecordingProposer, ScoredSandbox, config, iteration_bodies, make_candidates, make_loop

from agent.budget import BudgetLimits

pytestmark = pytest.mark.interpreter


def test_a_round_evaluates_distinct_samples_and_accepts_only_the_best(tmp_path):
    c = make_candidates(tmp_path / "cands")
    steps = [c["slower.py"], c["faster.py"], c["faster.py"],          # round 1: a twin inside the round
             c["slower.py"], ("error", "no idea"), c["wrong.py"]]     # round 2: slower was evaluated in round 1
    proposer = RecordingProposer([str(s) if not isinstance(s, tuple) else s for s in steps])
    scored = ScoredSandbox()
    loop, audit = make_loop(tmp_path, proposer, evaluate=scored, limits=BudgetLimits(iterations=5))
    loop.samples = 3
    loop.run()
    bodies = iteration_bodies(audit)
    recs = [b["record"] for b in bodies]
    got = [(r["iteration"], r["verdict"], r["failed_stage"]) for r in recs]
    assert got == [(0, "accepted", None), (1, "rejected", "acceptance"), (2, "accepted", None),
                   (3, "rejected", "duplicate"), (4, "rejected", "duplicate"), (5, "error", "proposer")]
    rules = [(b.get("decision") or {}).get("rule") for b in bodies]
    assert rules[1] == "sample" and "sample #2 of this round scored higher" in recs[1]["lesson"]
    assert "earlier sample of this round" in recs[3]["lesson"] and "iteration #1" in recs[4]["lesson"]
    # one context a round, the second round cut to the 2 iterations left; three full evaluations (seed, slower,
    # faster) and one A/B pair for the best
    assert [ctx.iteration for ctx in proposer.contexts] == [1, 1, 1, 4, 4]
    assert sum(q.correctness for q in scored.requests) == 3 and sum(not q.correctness for q in scored.requests) == 2
    # every sample is an iteration; every sample's tokens count
    assert bodies[-1]["used"]["iterations"] == 5
    assert bodies[-1]["used"]["tokens"] == 4 * 1200 + 120
    assert ("slower.py", False) in proposer.observed and ("faster.py", True) in proposer.observed


def test_the_llm_path_samples_in_parallel_and_the_loop_takes_the_faster_kernel(tmp_path, monkeypatch):
    from agent.cli_optimize import contract_for
    from agent.config import LLMConfig
    from agent.loop import Loop
    from agent.proposers.llm import LLMProposer
    from agent.audit import Audit
    from agent.progress import Progress
    from benchmarks.registry import load_operator
    from test_loop import plan
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    c = make_candidates(tmp_path / "cands")

    def reply(name):
        return Scripted(f"CHANGED: {name}\nWHY: test\n\n```python\n{c[name].read_text()}```\n",
                        prompt_tokens=1000, completion_tokens=100)
    with FakeLLMServer([reply("faster.py"), reply("wrong.py")]) as srv:
        cfg = config(tmp_path)
        proposer = LLMProposer("openai/fake", LLMConfig(api_base=srv.openai_base, timeout_s=30.0), backoff_s=0.01)
        p = plan(limits=BudgetLimits(iterations=2))
        audit = Audit(cfg.audit_db)
        loop = Loop(p, cfg, proposer, audit, contract_for(load_operator("rms_norm"), p.shapes), "run-1",
                    evaluate=ScoredSandbox(), progress=Progress(live=False), samples=2)
        loop.run()
        temps = sorted(r.body["temperature"] for r in srv.requests)
    bodies = iteration_bodies(audit)
    accepted = [b for b in bodies[1:] if b["record"]["accepted"]]
    assert len(bodies) == 3 and len(accepted) == 1
    assert audit.source(accepted[0]["source_sha256"]) == c["faster.py"].read_text()
    assert sorted(b["record"]["failed_stage"] or "" for b in bodies[1:]) == ["", "correctness"]
    assert temps == [0.7, 0.8]
    assert bodies[-1]["used"]["tokens"] == 2 * 1100
