"""Every move the search drops before the GPU reaches the audit trail with its reason.

The real loop runs the real search proposer to exhaustion, recording into a real SQLite trail in tmp_path. The
search's check compiles each move for sm_90 with triton (test_search_precheck's tiny matmul tile, whose 5- and
6-stage versions of the wide bucket need more shared memory than Hopper's 232448 bytes); the evaluator is a
stand-in, because what is checked here is where the drops land, not how candidates score."""
from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from agent import records as R
from agent.audit import Audit
from agent.budget import BudgetLimits
from agent.cli_audit import app as audit_app
from agent.cli_optimize import contract_for
from agent.config import load_config
from agent.loop import Loop, RunPlan
from agent.progress import Progress
from agent.proposers.search import SearchProposer
from agent.proposers.search_prefetch import MAX_SHARED_BYTES
from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.spec import Shape
from sandbox.verdict import EvalResult, ShapeResult
from test_search_precheck import BUCKETED, compile_at_a_tiny_shape

OP = "rms_norm"           # the run's registered operator; its kernel is the matmul tile, which the stand-in judges
SHAPE = Shape.make("tiny-a", {"T": 3, "H": 64}, dtype="fp32", weight=1.0)
# the launch record of a shape that reads bucket 1 only: the search moves that bucket's 12 grid points, no other
READS = [["buckets", 1, 1, key] for key in ("BLOCK_N", "num_warps", "num_stages")]


class StandIn:
    """The seed passes; every move fails correctness, so the search never climbs and spends its small space."""

    def __init__(self, seed: str):
        self.seed = seed

    def __call__(self, req) -> EvalResult:
        launches = {"kernels": [], "configs_read": READS, "note": ""}
        if req.source == self.seed:
            row = ShapeResult(SHAPE.id, dict(SHAPE.dims), "fp32", 1.0, timing_mode="interpreter", launches=launches)
            return EvalResult(op=OP, verdict="accepted", shapes=[row], interpreter=True)
        row = ShapeResult(SHAPE.id, dict(SHAPE.dims), "fp32", 1.0, error="max_rel_err 0.5 > 1e-5", launches=launches)
        return EvalResult(op=OP, verdict="rejected", failed_stage="correctness", reasons=["wrong"], shapes=[row],
                          interpreter=True)


def run_search(tmp_path, source: str) -> tuple[SearchProposer, Audit, Path]:
    """The loop with the search on `source` until the search has nothing more to propose."""
    cfg = load_config(None, [f"home={tmp_path / 'home'}", "knowledge.enabled=false", "acceptance.repeats=1"])
    audit = Audit(cfg.audit_db)
    plan = RunPlan(op=OP, shape_set="test", shapes=(SHAPE,), hardware=load_hardware("h200"), seed_source=source,
                   seed_path="mm.py", limits=BudgetLimits(iterations=30), rng_seed=3)
    # precheck=True: the interpreter's run would otherwise leave every move to the sandbox (nothing reaches a GPU)
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2, precheck=True)
    loop = Loop(plan, cfg, proposer, audit, contract_for(load_operator(OP), plan.shapes), "run-1",
                evaluate=StandIn(source), progress=Progress(live=False))
    out = loop.run()
    assert "nothing more to propose" in out.reason, out.reason
    return proposer, audit, cfg.audit_db


def recorded_drops(audit: Audit) -> list[dict]:
    iterations = R.of(R.typed(audit, "run-1"), R.Iteration)
    return [d for it in iterations if it.proposal for d in it.proposal.dropped]


def test_every_move_dropped_before_the_gpu_is_in_the_audit_trail_with_its_reason(tmp_path):
    proposer, audit, db = run_search(tmp_path, BUCKETED)
    # 2 of the 11 moves need too much shared memory: the wide tile (BLOCK_N 128) at 5 and 6 stages
    assert len(proposer.dropped) == 2, proposer.dropped
    recorded = recorded_drops(audit)
    assert recorded == [{"changed": c, "why": w} for c, w in proposer.dropped]     # each one, once, in order
    five = next(d for d in recorded if d["changed"] == "num_stages in CONFIGS['buckets'][1][1]: 4 -> 5")
    assert ("kernel _mm_kernel needs 245760 bytes of shared memory per block; "
            f"Hopper allows {MAX_SHARED_BYTES}") in five["why"]
    assert "CONFIGS['buckets'][1][1]" in five["why"]

    # the stored body itself, under the hash chain, not only its typed reading
    bodies = [r.body for r in audit.records("run-1", "iteration")]
    assert any(five in (b["proposal"] or {}).get("meta", {}).get("dropped", []) for b in bodies)
    assert audit.verify().ok
    audit.close()

    shown = CliRunner().invoke(audit_app, ["show", "run-1", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "2 search moves dropped before the GPU by the compile check" in shown.output, shown.output


def test_a_drop_with_no_proposal_after_it_goes_out_with_the_final_one(tmp_path):
    # the space is the wide tile at 4 (the seed) or 5 stages: the one move is dropped and the search ends
    only_five = BUCKETED.replace('SEARCH_SPACE = {"BLOCK_N": [64, 128], "num_warps": [4]}',
                                 'SEARCH_SPACE = {"BLOCK_N": [128], "num_warps": [4], "num_stages": [4, 5]}')
    assert only_five != BUCKETED
    proposer, audit, _ = run_search(tmp_path, only_five)
    iterations = R.of(R.typed(audit, "run-1"), R.Iteration)
    assert [it.record.is_seed for it in iterations] == [True, False]     # the seed, then the search's last word
    final = iterations[-1].proposal
    assert final.meta.get("final") and "1 dropped before the GPU" in final.error
    assert [d["changed"] for d in final.dropped] == ["num_stages in CONFIGS['buckets'][1][1]: 4 -> 5"]
    assert "needs 245760 bytes of shared memory per block" in final.dropped[0]["why"]
    assert recorded_drops(audit) == [{"changed": c, "why": w} for c, w in proposer.dropped]
