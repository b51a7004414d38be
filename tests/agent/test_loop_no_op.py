"""A candidate whose calls do the incumbent's work at every scored shape is rejected before any A/B (agent/no_op.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.audit import Audit
from agent.budget import BudgetLimits
from agent.cli_optimize import contract_for
from agent.config import load_config
from agent.loop import Loop, RunPlan
from agent.progress import Progress
from agent.proposers.scripted import ScriptedProposer
from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.spec import Shape
from sandbox import evaluate as sandbox_evaluate

OP = "rms_norm"
SHAPES = (Shape.make("tiny-a", {"T": 3, "H": 64}, dtype="fp32", weight=2.0),
          Shape.make("tiny-b", {"T": 2, "H": 300}, dtype="fp32", weight=1.0))


@pytest.mark.interpreter
def test_the_incumbents_work_again_is_rejected_and_a_real_change_still_goes_on(tmp_path):
    seed = Path(load_operator(OP).seed_path).read_text()
    # PDL is read at every shape, but off a GPU no launch uses it: the same work, as softmax's ONE_READ and PDL
    # were at its T = 64 shapes in session 31's search run
    assert seed.count('"PDL": 0,') == 1, "the seed changed: pick another setting that no CPU call uses"
    same_work = seed.replace('"PDL": 0,', '"PDL": 1,')
    more_rows = re.sub(r'"ROWS": (\d+)', lambda m: f'"ROWS": {2 * int(m.group(1))}', seed)
    files = []
    for name, text in (("same_work.py", same_work), ("more_rows.py", more_rows)):
        assert text != seed
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    # accept-correct: without the no-op rule, the first candidate (correct, changed) would be accepted here
    cfg = load_config(None, [f"home={tmp_path / 'home'}", "knowledge.enabled=false", "sandbox.trials=1",
                             "sandbox.holdout=false", "acceptance.untimed=accept-correct"])
    audit = Audit(cfg.audit_db)
    plan = RunPlan(op=OP, shape_set="test", shapes=SHAPES, hardware=load_hardware("h200"), seed_source=seed,
                   seed_path="seed.py", limits=BudgetLimits(iterations=3), rng_seed=3)
    loop = Loop(plan, cfg, ScriptedProposer(files), audit, contract_for(load_operator(OP), SHAPES), "run-1",
                evaluate=sandbox_evaluate, progress=Progress(live=False))
    out = loop.run()

    bodies = [r.body for r in audit.records("run-1", "iteration")]
    recs, decisions = [b["record"] for b in bodies], [b["decision"] for b in bodies]
    assert (recs[1]["verdict"], recs[1]["failed_stage"], decisions[1]["rule"]) == ("rejected", "acceptance", "no-op")
    assert "changes nothing the scored shapes run" in decisions[1]["reason"]
    assert set(decisions[1]["trace_digests"]) == {"tiny-a", "tiny-b"}
    assert recs[2]["accepted"] and decisions[2]["rule"] != "no-op"        # twice the rows: other launches
    assert out.incumbent_sha256 == recs[2]["candidate_hash"]
    assert audit.verify().ok
