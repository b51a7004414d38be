"""The loop end to end: scripted and recording proposers, a real SQLite trail in tmp_path, and the real
sandbox under Triton's interpreter at tiny rms_norm shapes.

Under the interpreter there is no timing, so most tests hand the loop a scoring evaluator: the real
sandbox decides correctness (lint, compile, reference check, hold-out shapes), then a timing model
written here gives each passing shape an attainment from the candidate's tunables (rows per program
/ 16, read from its CONFIGS without running it). It is deterministic and checkable by hand, which is
what lets these tests assert exactly which candidate wins an A/B.
"""
from __future__ import annotations

import ast
import json
import os
import re
import signal
from pathlib import Path

import pytest

from agent.audit import Audit
from agent.budget import BudgetLimits
from agent.cli_optimize import contract_for
from agent.config import load_config
from agent.acceptance import run_score
from agent.loop import Loop, RunPlan
from agent.progress import Progress
from agent.proposers.scripted import ScriptedProposer
from agent.types import Proposal, Usage
from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.spec import Shape

pytestmark = pytest.mark.interpreter

OP = "rms_norm"
SHAPES = (Shape.make("tiny-a", {"T": 3, "H": 64}, dtype="fp32", weight=2.0),
          Shape.make("tiny-b", {"T": 2, "H": 300}, dtype="fp32", weight=1.0))


# ---- candidates, derived from the seed so they track it ------------------------------------------
def seed_source() -> str:
    return Path(load_operator(OP).seed_path).read_text()


def _scale_rows(src: str, factor: float) -> str:
    return re.sub(r'"ROWS": (\d+)', lambda m: f'"ROWS": {max(1, int(int(m.group(1)) * factor))}', src)


def make_candidates(folder: Path) -> dict[str, Path]:
    src = seed_source()
    assert src.count("y = x * rstd[:, None] * w[None, :]") >= 1, "the seed changed: update make_candidates"
    variants = {
        "faster.py": _scale_rows(src, 2),                        # twice the rows per program: scores higher
        "wrong.py": src.replace("y = x * rstd[:, None] * w[None, :]", "y = x * rstd[:, None]"),  # drops weight
        "torch_op.py": src.replace("    return y\n", "    return (x.float() * weight.float()).to(x.dtype)\n"),
        "slower.py": _scale_rows(src, 0.5),
        "syntax.py": src.replace("def rms_norm(", "def rms_norm(((", 1),
    }
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, text in variants.items():
        assert text != src, name
        (folder / name).write_text(text)
        out[name] = folder / name
    return out


# ---- the test's timing model on top of the real sandbox ------------------------------------------
def rows_attainment(source: str, H: int) -> float | None:
    """min(1, ROWS / 16) for the CONFIGS entry the seed's launcher picks for this H."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CONFIGS" for t in node.targets):
            table = ast.literal_eval(node.value)["by_block_h"]
            block = 1 << max(0, (H - 1).bit_length())
            key = min((k for k in table if k >= block), default=max(table))
            return min(1.0, table[key]["ROWS"] / 16)
    return None


class ScoredSandbox:
    """The real sandbox for every verdict, plus the timing model above for attainment."""

    def __init__(self):
        from sandbox import evaluate
        self.evaluate = evaluate
        self.requests = []

    def __call__(self, req):
        self.requests.append(req)
        result = self.evaluate(req)
        if result.accepted:
            asked = {s.id: s for s in req.shapes}      # the interpreter ran scaled-down dims; score the real ones
            for s in result.visible_shapes():
                s.attainment = rows_attainment(req.source, asked[s.id].dim["H"])
        return result


class RecordingProposer:
    """A real proposer that plays a list of steps and keeps every context it was handed.

    Step: a path (propose that file), ("error", text) (no candidate), ("raise", text) (an exception,
    like a crashing SDK), ("signal", signum, path) (deliver a signal to this process, then propose)."""

    name = "recording"

    def __init__(self, steps):
        self.steps, self.contexts, self.observed = list(steps), [], []

    def propose(self, ctx):
        self.contexts.append(ctx)
        if not self.steps:
            return Proposal(source=None, error="out of steps", meta={"final": True})
        step = self.steps.pop(0)
        if isinstance(step, tuple) and step[0] == "error":
            return Proposal(source=None, error=step[1], usage=Usage(prompt_tokens=100, completion_tokens=20, usd=0.01))
        if isinstance(step, tuple) and step[0] == "raise":
            raise ConnectionError(step[1])
        if isinstance(step, tuple) and step[0] == "signal":
            os.kill(os.getpid(), step[1])
            step = step[2]
        return Proposal(source=Path(step).read_text(), changed=Path(step).name, why="test step",
                        usage=Usage(prompt_tokens=1000, completion_tokens=200, usd=0.1, calls=1))

    def observe(self, proposal, result, accepted):
        self.observed.append((proposal.changed, accepted))


def config(tmp_path, *extra, holdout=False):
    """Hold-out shapes cost about 6 s an evaluation under the interpreter: only the tests about them keep them.
    acceptance.untimed=accept-correct: without a scorer, a changed correct candidate is accepted, so these
    tests can follow the incumbent (test_untimed_candidates_keep_the_incumbent_by_default checks the default)."""
    return load_config(None, [f"home={tmp_path / 'home'}", "acceptance.repeats=1", "knowledge.enabled=false",
                              "sandbox.trials=1", f"sandbox.holdout={str(holdout).lower()}",
                              "acceptance.untimed=accept-correct", *extra])


def plan(**kw) -> RunPlan:
    base = dict(op=OP, shape_set="test", shapes=SHAPES, hardware=load_hardware("h200"), seed_source=seed_source(),
                seed_path="seed.py", limits=BudgetLimits(iterations=10), rng_seed=3)
    base.update(kw)
    return RunPlan(**base)


def make_loop(tmp_path, proposer, cfg=None, run_id="run-1", evaluate=None, **plan_kw):
    from sandbox import evaluate as sandbox_evaluate
    cfg = cfg or config(tmp_path)
    audit = Audit(cfg.audit_db)
    p = plan(**plan_kw)
    loop = Loop(p, cfg, proposer, audit, contract_for(load_operator(OP), p.shapes), run_id,
                evaluate=evaluate or sandbox_evaluate, progress=Progress(live=False))
    return loop, audit


def iteration_bodies(audit, run_id="run-1"):
    return [r.body for r in audit.records(run_id, "iteration")]


def holdout_texts(audit):
    """Every way a hidden shape could be written: its id and `K=V` for dims no visible shape has."""
    visible = {(k, v) for s in SHAPES for k, v in s.dims}
    out = set()
    for r in audit.records(kind="evaluation"):
        for s in r.body["result"]["shapes"]:
            if s["holdout"]:
                out.add(s["id"])
                out |= {f"{k}={v}" for k, v in s["dims"].items() if (k, v) not in visible}
    return out


# ---- tests ------------------------------------------------------------------------------------------
def test_scripted_run_end_to_end(tmp_path):
    c = make_candidates(tmp_path / "cands")
    files = [c["faster.py"], c["wrong.py"], c["torch_op.py"], c["slower.py"], c["faster.py"], c["syntax.py"]]
    proposer = RecordingProposer([str(f) for f in files])
    scored = ScoredSandbox()
    loop, audit = make_loop(tmp_path, proposer, cfg=config(tmp_path, holdout=True), evaluate=scored)
    out = loop.run()

    recs = [b["record"] for b in iteration_bodies(audit)]
    got = [(r["iteration"], r["verdict"], r["failed_stage"], r["accepted"]) for r in recs]
    assert got[0] == (0, "accepted", None, True)
    assert got[1] == (1, "accepted", None, True)                       # faster: wins its A/B
    assert got[2][1:3] == ("rejected", "correctness")                  # wrong: drops the weight
    assert got[3][1] == "rejected" and got[3][2] in ("lint", "correctness")   # computes with torch
    assert got[4][1:3] == ("rejected", "acceptance")                   # slower: passes the gates, loses A/B
    assert got[5][1:3] == ("rejected", "duplicate")                    # faster again: not re-evaluated
    assert got[6][1] == "rejected" and got[6][2] in ("lint", "compile")
    assert got[7][1:3] == ("error", "proposer")                        # out of steps
    assert "nothing more to propose" in out.reason
    view = audit.db.execute("SELECT iteration, verdict, failed_stage FROM iterations WHERE run_id = 'run-1'").fetchall()
    assert [(int(i), v, f) for i, v, f in view] == [(i, v, f) for i, v, f, _ in got]     # the SQL views agree

    # scores from the timing model: seed (2*8/16 + 1*4/16)/3, faster (2*1 + 1*8/16)/3
    assert recs[0]["score"] == pytest.approx((2 * 0.5 + 0.25) / 3)
    assert recs[1]["score"] == pytest.approx((2 * 1.0 + 0.5) / 3)
    assert out.score == pytest.approx(recs[1]["score"])
    assert recs[2]["lesson"].startswith("rejected at correctness")

    # the final kernel is the accepted one, on disk and in the DB; the trail verifies
    faster = c["faster.py"].read_text()
    assert Path(out.incumbent_path).read_text() == faster
    acc = [r.body for r in audit.records("run-1", "accepted")]
    assert [a["iteration"] for a in acc] == [0, 1]
    for a in acc:
        assert Path(a["path"]).read_text() == audit.source(a["source_sha256"])
    assert audit.verify().ok

    # A/B re-measures: one pair (repeats=1) for the candidate whose first score beat the incumbent's, without
    # correctness; the slower one was screened out on its first measurement
    roles = [r.body["role"] for r in audit.records("run-1", "evaluation")]
    assert roles.count("ab_incumbent") == roles.count("ab_candidate") == 1
    remeasures = [q for q in scored.requests if not q.correctness]
    assert len(remeasures) == 2     # correctness off: no hold-out shapes either (they are correctness checks)
    decisions = [r.body["decision"] for r in audit.records("run-1", "iteration")]
    assert decisions[1]["rule"] == "ab-interleaved" and decisions[4]["rule"] == "screen"
    assert decisions[4]["candidate"][0] < recs[1]["score"]

    # the proposer was told what happened, and never saw a hidden shape
    assert proposer.observed[:5] == [("faster.py", True), ("wrong.py", False), ("torch_op.py", False),
                                     ("slower.py", False), ("faster.py", False)]
    secrets = holdout_texts(audit)
    assert secrets, "the sandbox checked no hold-out shapes"
    for ctx in proposer.contexts:
        text = ctx.feedback + json.dumps(ctx.incumbent_result) + " ".join(r.to_prompt_line() for r in ctx.memory)
        leaked = [s for s in secrets if re.search(rf"(?<![\w-]){re.escape(s)}(?!\d)", text)]
        assert not leaked, leaked
    assert proposer.contexts[0].incumbent_source != faster
    assert proposer.contexts[1].iteration == 2
    assert proposer.contexts[1].incumbent_source == faster                # incumbent moved after iteration 1
    assert proposer.contexts[1].memory[-1].iteration == 1
    assert "rejected at correctness" in proposer.contexts[2].feedback or "correctness" in proposer.contexts[2].feedback


def test_without_the_screen_every_gated_candidate_gets_its_ab(tmp_path):
    """acceptance.screen=false: the slower candidate is re-measured in A/B pairs and loses there."""
    c = make_candidates(tmp_path / "cands")
    proposer = RecordingProposer([str(c["slower.py"])])
    loop, audit = make_loop(tmp_path, proposer, cfg=config(tmp_path, "acceptance.screen=false"),
                            evaluate=ScoredSandbox(), limits=BudgetLimits(iterations=1))
    loop.run()
    roles = [r.body["role"] for r in audit.records("run-1", "evaluation")]
    assert roles.count("ab_incumbent") == roles.count("ab_candidate") == 1
    decision = audit.records("run-1", "iteration")[1].body["decision"]
    assert decision["rule"] == "ab-interleaved" and not decision["accept"]


class FirstReadsLowSandbox(ScoredSandbox):
    """As measured on the H200: a full evaluation (correctness on) reads lower than the light A/B re-measures."""

    def __call__(self, req):
        result = super().__call__(req)
        if req.correctness:
            for s in result.visible_shapes():
                s.attainment = s.attainment * 0.75 if s.attainment is not None else None
        return result


def test_the_screen_compares_first_measurements_with_first_measurements(tmp_path):
    """After an acceptance the incumbent's score is its A/B median; a later candidate's first (full) measurement
    must be screened against the incumbent's first measurement, or a biased full evaluation would screen out
    every later gain."""
    c = make_candidates(tmp_path / "cands")
    (tmp_path / "cands" / "fastest.py").write_text(_scale_rows(seed_source(), 4))
    proposer = RecordingProposer([str(c["faster.py"]), str(tmp_path / "cands" / "fastest.py")])
    loop, audit = make_loop(tmp_path, proposer, evaluate=FirstReadsLowSandbox(), limits=BudgetLimits(iterations=2))
    loop.run()
    decisions = [r.body["decision"] for r in audit.records("run-1", "iteration")][1:]
    assert [d["rule"] for d in decisions] == ["ab-interleaved", "ab-interleaved"]
    assert [d["accept"] for d in decisions] == [True, True]
    # fastest's first read (1.0 x 0.75) is below faster's A/B score (0.833) but above faster's first read (0.625)
    assert decisions[1]["candidate"][0] == pytest.approx(1.0)


def test_dropout_masks_records_from_the_proposer_by_construction(tmp_path):
    c = make_candidates(tmp_path / "cands")
    steps = [("error", f"no idea #{i}") for i in range(1, 3)] + [str(c["faster.py"])] + \
            [("error", f"no idea #{i}") for i in range(4, 12)]
    proposer = RecordingProposer(steps)
    cfg = config(tmp_path, "dropout.patience=3", "dropout.p=0.5")
    loop, audit = make_loop(tmp_path, proposer, cfg=cfg, limits=BudgetLimits(iterations=11))
    loop.run()    # interpreter, no scorer: accept-correct accepts the faster candidate on correctness alone

    drops = [r.body for r in audit.records("run-1", "dropout")]
    assert [d["iteration"] for d in drops] == [7, 10]    # 3 stalls after the acceptance at 3, then 3 more
    masked = set()
    for d in drops:
        masked |= set(d["masked"])
        assert d["rng_seed"] == (3 * 1_000_003 + d["iteration"]) % 2**32
        assert not set(d["masked"]) & {0, 3, d["iteration"] - 1}
    assert masked
    by_it = {ctx.iteration: ctx for ctx in proposer.contexts}
    for d in drops:
        shown = {r.iteration for r in by_it[d["iteration"]].memory}
        assert {0, 3, d["iteration"] - 1} <= shown              # seed, latest accepted, latest
    final = {r.iteration for r in proposer.contexts[-1].memory}
    assert not final & masked
    last_ctx = proposer.contexts[-1]
    text = last_ctx.feedback + " ".join(r.to_prompt_line() for r in last_ctx.memory)
    for i in masked:
        assert not re.search(rf"no idea #{i}\b", text), i
    assert "older records were set aside" in by_it[drops[0]["iteration"]].feedback
    assert audit.verify().ok


def test_no_dropout_keeps_every_record(tmp_path):
    proposer = RecordingProposer([("error", f"no idea #{i}") for i in range(1, 8)])
    cfg = config(tmp_path, "dropout.patience=2", "dropout.enabled=false")
    loop, audit = make_loop(tmp_path, proposer, cfg=cfg, limits=BudgetLimits(iterations=7))
    assert loop.run().reason == "iterations budget reached: used 7 of 7"
    assert audit.records("run-1", "dropout") == []
    assert [r.iteration for r in proposer.contexts[-1].memory] == list(range(0, 7))


def test_budgets_stop_the_loop_with_the_reason(tmp_path):
    proposer = RecordingProposer([("error", "x")] * 50)
    loop, audit = make_loop(tmp_path, proposer, limits=BudgetLimits(tokens=250, iterations=40))
    out = loop.run()
    assert out.reason.startswith("tokens budget reached: used 360 of 250")   # 3 proposals x 120 tokens
    end = audit.records("run-1", "run_end")[-1].body
    assert end["used"]["tokens"] == 360 and end["used"]["iterations"] == 3
    assert end["used"]["usd"] == pytest.approx(0.03)
    assert end["used"]["gpu_s"] == 0.0                   # interpreter evaluations use no GPU


def test_target_reached_stops_the_run(tmp_path):
    """S_i of the seed under the test's timing model is median(8/16, 4/16) = 0.375."""
    proposer = RecordingProposer([("error", "never asked")])
    loop, audit = make_loop(tmp_path, proposer, evaluate=ScoredSandbox(), target=0.3)
    out = loop.run()
    assert out.reason == "target reached: S_i 0.375 >= 0.3"
    assert proposer.contexts == [] and out.iterations == 0
    assert audit.records("run-1", "run_end")[0].body["s_i"] == pytest.approx(0.375)


def test_untimed_candidates_keep_the_incumbent_by_default(tmp_path):
    """Under the interpreter nothing is timed: by default a correct candidate is recorded, not accepted."""
    c = make_candidates(tmp_path / "cands")
    proposer = RecordingProposer([str(c["faster.py"])])
    cfg = load_config(None, [f"home={tmp_path / 'home'}", "knowledge.enabled=false", "sandbox.trials=1",
                             "sandbox.holdout=false"])
    loop, audit = make_loop(tmp_path, proposer, cfg=cfg)
    out = loop.run()
    recs = [b["record"] for b in iteration_bodies(audit)]
    assert recs[1]["verdict"] == "rejected" and recs[1]["failed_stage"] == "acceptance"
    assert "interpreter" in recs[1]["lesson"] or "GPU" in recs[1]["lesson"]
    assert out.incumbent_sha256 == recs[0]["candidate_hash"]             # still the seed
    assert [b["iteration"] for b in (r.body for r in audit.records("run-1", "accepted"))] == [0]


def test_failures_are_recorded_and_the_loop_goes_on(tmp_path):
    c = make_candidates(tmp_path / "cands")
    calls = {"n": 0}
    from sandbox import evaluate as real

    def evaluator_with_a_harness_crash(req):
        """The real sandbox, except that its second call raises as a harness bug would."""
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("worker pipe closed unexpectedly")
        return real(req)

    proposer = RecordingProposer([str(c["wrong.py"]), ("raise", "HTTP 529 overloaded"), str(c["faster.py"])])
    loop, audit = make_loop(tmp_path, proposer, evaluate=evaluator_with_a_harness_crash)
    loop.run()
    recs = [b["record"] for b in iteration_bodies(audit)]
    assert recs[1]["verdict"] == "rejected" and recs[1]["failed_stage"] == "sandbox"
    assert "sandbox raised RuntimeError" in json.dumps(audit.records("run-1", "evaluation")[1].body)
    assert recs[2]["verdict"] == "error" and "ConnectionError: HTTP 529 overloaded" in recs[2]["lesson"]
    assert recs[3]["accepted"] is True                    # the loop went on and accepted the next one
    assert audit.verify().ok


def test_sigterm_stops_after_recording_the_current_iteration(tmp_path):
    c = make_candidates(tmp_path / "cands")
    proposer = RecordingProposer([("error", "a"), ("signal", signal.SIGTERM, str(c["faster.py"])), ("error", "never")])
    loop, audit = make_loop(tmp_path, proposer)
    before = signal.getsignal(signal.SIGTERM)
    out = loop.run()
    assert signal.getsignal(signal.SIGTERM) == before          # handlers restored
    assert out.reason.startswith("stopped by SIGTERM after recording iteration 2")
    recs = [b["record"] for b in iteration_bodies(audit)]
    assert [r["iteration"] for r in recs] == [0, 1, 2]
    assert recs[2]["accepted"] is True and loop.stop_signal == signal.SIGTERM
    assert len(proposer.steps) == 1
    assert audit.verify().ok


def test_resume_restores_incumbent_memory_and_budgets(tmp_path):
    c = make_candidates(tmp_path / "cands")
    scored = ScoredSandbox()
    first = RecordingProposer([str(c["faster.py"]), ("error", "b")])
    loop, audit = make_loop(tmp_path, first, evaluate=scored, limits=BudgetLimits(iterations=2))
    assert loop.run().reason.startswith("iterations budget reached")
    audit.close()

    second = RecordingProposer([("error", "c"), str(c["slower.py"])])
    loop2, audit2 = make_loop(tmp_path, second, evaluate=scored, limits=BudgetLimits(iterations=4))
    out = loop2.run(resume=True)
    assert out.reason == "iterations budget reached: used 4 of 4"
    ctx = second.contexts[0]
    assert ctx.iteration == 3
    assert ctx.incumbent_source == c["faster.py"].read_text()
    assert ctx.incumbent_score == pytest.approx((2 * 1.0 + 0.5) / 3)
    assert [r.iteration for r in ctx.memory] == [0, 1, 2]
    assert loop2.st.used.tokens == 1200 + 120 + 120 + 1200
    assert [r.body["session"] for r in audit2.records("run-1", "resume")] == [2]
    recs = [b["record"] for b in iteration_bodies(audit2)]
    assert [r["iteration"] for r in recs] == [0, 1, 2, 3, 4]
    assert recs[4]["failed_stage"] == "acceptance"
    assert audit2.verify().ok


def test_run_score_is_weighted_and_none_without_timing():
    from sandbox.verdict import EvalResult, ShapeResult
    rows = [ShapeResult("a", {"T": 1}, "fp32", 3.0, attainment=0.5), ShapeResult("b", {"T": 1}, "fp32", 1.0,
                                                                                  error="boom")]
    assert run_score(EvalResult(op="x", verdict="accepted", shapes=rows)) == pytest.approx(0.375)
    rows[1] = ShapeResult("b", {"T": 1}, "fp32", 1.0)   # passed but not timed (interpreter)
    assert run_score(EvalResult(op="x", verdict="accepted", shapes=rows)) is None
    assert run_score(EvalResult(op="x", verdict="rejected", shapes=rows)) == 0.0


def test_live_display_on_a_terminal_and_one_plain_line_per_iteration_otherwise():
    import io
    from rich.console import Console
    from agent.progress import Status
    st = Status("run-x", OP, 3, 0.42, "faster.py", "accepted: score 0.40 -> 0.42", "iter 3/10", "evaluating")
    buf = io.StringIO()
    with Progress(console=Console(file=buf, force_terminal=True, width=120), live=True) as p:
        p.update(st)
    out = buf.getvalue()
    assert "best score" in out and "0.420" in out and "evaluating" in out and "iter 3/10" in out
    buf = io.StringIO()
    with Progress(console=Console(file=buf, force_terminal=False, width=200)) as p:
        p.update(st)                 # an iteration in flight: nothing printed in plain mode
        p.update(st, final=True)     # recorded: one line
    assert buf.getvalue() == f"[{OP} #3] best=0.420 | faster.py -> accepted: score 0.40 -> 0.42 | iter 3/10\n"


def test_plain_mode_says_each_step_of_iteration_zero_as_it_starts():
    """The seed's evaluation and each baseline come before the first iteration line; a log would be silent for
    minutes (torch.compile's baseline of moe_topk_softmax took over 2.5 minutes on an H100)."""
    import io
    import re as re_
    from rich.console import Console
    from agent.progress import Status
    buf = io.StringIO()
    with Progress(console=Console(file=buf, force_terminal=False, width=200)) as p:
        for phase in ("evaluating the seed", "evaluating the seed", "timing baseline compile"):
            p.update(Status("run-x", OP, 0, None, "", "", "iter 0/10", phase))
        p.update(Status("run-x", OP, 1, 0.5, "", "", "iter 1/10", "evaluating"))      # later phases: not printed
    lines = buf.getvalue().splitlines()
    assert lines[0] == f"[{OP} #0] evaluating the seed"
    assert re_.fullmatch(rf"\[{OP} #0\] timing baseline compile \(\d+ s after the last step began\)", lines[1])
    assert len(lines) == 2


@pytest.mark.gpu
def test_gpu_run_uses_interleaved_ab_and_times_the_baselines(tmp_path):
    """On a GPU: real timing, so the loop's own A/B rule decides (3 repeats), the baselines are timed once,
    GPU minutes are counted, and the export's table carries the baseline columns."""
    from agent.audit_export import performance_markdown, load_run
    c = make_candidates(tmp_path / "cands")
    # slower.py halves ROWS, which is already 1 at H = 4096: the loop would find it launches what the incumbent
    # launches and skip its A/B. Two warps a row of 4096 changes the launches of both shapes (and passes the gates)
    src = seed_source()
    two_warps = re.sub(r'(4096: \{"ROWS": 1, "num_warps": )\d+', r"\g<1>2", src)
    assert two_warps != src, "the seed's H = 4096 entries changed: update this test"
    (tmp_path / "cands" / "two_warps.py").write_text(two_warps)
    shapes = (Shape.make("decode-4k", {"T": 8, "H": 4096}, dtype="bf16", weight=2.0),
              Shape.make("prefill-4k", {"T": 2048, "H": 4096}, dtype="bf16", weight=1.0))
    proposer = RecordingProposer([str(c["faster.py"]), str(tmp_path / "cands" / "two_warps.py"), str(c["wrong.py"])])
    cfg = load_config(None, [f"home={tmp_path / 'home'}", "acceptance.repeats=3", "knowledge.enabled=false",
                             "acceptance.screen=false"])
    loop, audit = make_loop(tmp_path, proposer, cfg=cfg, shapes=shapes, target=2.0)   # never reached: run all three
    out = loop.run()
    assert not out.interpreter and out.score is not None
    evals = [r.body for r in audit.records("run-1", "evaluation")]
    roles = [e["role"] for e in evals]
    assert roles.count("baseline:eager") == 1 and roles.count("baseline:compile") == 1
    assert roles.count("ab_incumbent") == roles.count("ab_candidate") == 6     # two candidates passed the gates
    assert all(e["gpu_s"] > 0 for e in evals)
    decisions = [r.body["decision"] for r in audit.records("run-1", "iteration")[1:3]]
    assert all(d["rule"] == "ab-interleaved" and len(d["incumbent"]) == 3 for d in decisions)
    assert [r.body["record"]["failed_stage"] for r in audit.records("run-1", "iteration")][3] == "correctness"
    perf = performance_markdown(load_run(audit, "run-1"))
    assert "eager (us)" in perf and "compile (us)" in perf and "Interpreter run" not in perf
    assert audit.verify().ok


def test_an_accepted_kernel_joins_the_knowledge_base(tmp_path):
    """The base grows as aka works: on acceptance the kernel is indexed in the reference layer, where the
    search proposer finds alternatives for the operator (a real keyword-only knowledge base on disk)."""
    from agent.cli_optimize import KnowledgeRetriever
    from knowledge.kb import KnowledgeBase
    from sandbox import evaluate as sandbox_evaluate
    c = make_candidates(tmp_path / "cands")
    kb = KnowledgeBase(tmp_path / "kb", vectors=False)
    cfg = config(tmp_path)
    p = plan()
    loop = Loop(p, cfg, RecordingProposer([str(c["faster.py"]), str(c["wrong.py"])]), Audit(cfg.audit_db),
                contract_for(load_operator(OP), p.shapes), "run-1", evaluate=sandbox_evaluate,
                retriever=KnowledgeRetriever(kb, cfg), progress=Progress(live=False))
    loop.run()
    texts = [f.text for f in kb.reference_files(OP)]
    assert c["faster.py"].read_text() in texts            # accepted at iteration 1
    assert c["wrong.py"].read_text() not in texts         # rejected at correctness: never indexed
