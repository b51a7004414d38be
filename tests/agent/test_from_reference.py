"""`aka optimize --from-reference`: no seed; the LLM writes the first kernel from the contract and the reference.

The LLM proposer talks to the real local fake server (tests/agent/fake_llm_server.py) over a socket on
127.0.0.1; the sandbox is the real one under Triton's interpreter at tiny rms_norm shapes, with
test_loop's timing model on top so the faster kernel can win its A/B.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, Scripted
from test_cli_optimize import invoke, make_app, tiny_shapes
from test_loop import OP, ScoredSandbox, config, make_candidates, make_loop, seed_source

from agent.audit_export import load_run, performance_markdown
from agent.budget import BudgetLimits
from agent.cli_optimize import contract_for
from agent.config import LLMConfig
from agent.feedback import build_prompt
from agent.from_reference import reference_source
from agent.loop import EXIT_NO_KERNEL, RULE_FROM_REFERENCE
from agent.proposers.llm import LLMProposer
from agent.proposers.search import SearchProposer
from agent.types import ProposalContext
from benchmarks.registry import load_operator

pytestmark = pytest.mark.interpreter

FROM_REF = dict(from_reference=True, seed_source="", seed_path="")


def reply(source: str, changed: str) -> Scripted:
    return Scripted(f"CHANGED: {changed}\nWHY: test\n\n```python\n{source}```\n")


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fromref-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeLLMServer() as srv:
        yield srv


def llm(srv) -> LLMProposer:
    return LLMProposer("openai/fake-model", LLMConfig(api_base=srv.openai_base, timeout_s=10.0), backoff_s=0.01)


def user_text(request) -> str:
    return request.body["messages"][-1]["content"]


def test_writes_a_first_kernel_then_optimizes_it(tmp_path, server):
    c = make_candidates(tmp_path / "cands")
    script = [(c["syntax.py"], "broken: does not parse"), (c["torch_op.py"], "lint cheat: torch computes"),
              (Path(load_operator(OP).seed_path), "correct"), (c["faster.py"], "faster: twice the rows")]
    server.push(*(reply(Path(p).read_text(), why) for p, why in script))
    loop, audit = make_loop(tmp_path, llm(server), evaluate=ScoredSandbox(), limits=BudgetLimits(iterations=4),
                            **FROM_REF)
    out = loop.run()

    recs = [r.body for r in audit.records("run-1", "iteration")]
    got = [(r["record"]["iteration"], r["record"]["verdict"], r["record"]["failed_stage"]) for r in recs]
    assert got[0] == (0, "rejected", "lint")
    assert got[1][1] == "rejected" and got[1][2] in ("lint", "correctness")
    assert got[2] == (2, "accepted", None) and got[3] == (3, "accepted", None)
    assert [r["decision"]["rule"] for r in recs[2:]] == [RULE_FROM_REFERENCE, "ab-interleaved"]
    assert not any(r["record"]["is_seed"] for r in recs)
    acc = [r.body for r in audit.records("run-1", "accepted")]
    assert [(a["iteration"], a["from_reference"], a["seed"]) for a in acc] == [(2, True, False), (3, False, False)]
    start = audit.records("run-1", "run_start")[0].body
    assert start["from_reference"] and start["seed_source_sha256"] == "" and start["reference_tries"] == 10
    assert "seed" not in {r.body["role"] for r in audit.records("run-1", "evaluation")}
    assert audit.verify().ok

    # the faster kernel is the result; "before" in the summary is the first passing kernel (the correct one)
    assert out.exit_code == 0 and "iterations budget" in out.reason
    assert Path(out.incumbent_path).read_text() == c["faster.py"].read_text()
    assert {r["id"]: r["a_before"] for r in out.rows} == {"tiny-a": 0.5, "tiny-b": 0.25}
    assert {r["id"]: r["a_after"] for r in out.rows} == {"tiny-a": 1.0, "tiny-b": 0.5}
    table = performance_markdown(load_run(audit, "run-1"))
    assert "No seed" in table and "| first (us) |" in table and "attain first" in table

    # what the model was told: the reference and the contract first, each failure's reason next
    first, second, third, fourth = (user_text(r) for r in server.requests)
    assert "no kernel yet" in first and "torch.rsqrt(xf.pow(2).mean(" in first
    assert "tiny-a: a new tensor of shape (3, 64), dtype fp32" in first
    assert "# The candidate format" in first and "The principle:" in first and "torch-compute" in first
    assert "make_inputs" not in first and "holdout_dims" not in first
    assert "Feedback" not in first
    assert "does not parse" in second and "#0 rejected at lint" in second
    assert "#1 rejected" in third
    assert "The current kernel (the incumbent" in fourth and "no kernel yet" not in fourth
    # every attempt counts against the token budget (100 prompt + 50 completion tokens each)
    assert audit.records("run-1", "run_end")[0].body["used"]["tokens"] == 4 * 150


def test_gives_up_after_the_tries_with_exit_4(tmp_path, server):
    c = make_candidates(tmp_path / "cands")
    server.push(*(reply(c["syntax.py"].read_text() + f"# try {i}\n", f"try {i}") for i in range(2)))
    loop, audit = make_loop(tmp_path, llm(server), limits=BudgetLimits(iterations=10), reference_tries=2, **FROM_REF)
    out = loop.run()
    assert out.exit_code == EXIT_NO_KERNEL and out.reason.startswith("gave up: none of the 2 kernels")
    assert "--reference-tries 2" in out.reason and out.incumbent_sha256 == ""
    assert audit.records("run-1", "accepted") == [] and len(server.requests) == 2
    assert audit.records("run-1", "run_end")[0].body["exit_code"] == EXIT_NO_KERNEL


class Crash(BaseException):
    """Not an Exception: escapes the loop as a kill would, leaving no run_end record."""


class CrashingProposer:
    name = "crashing"
    writes_from_reference = True

    def __init__(self, first: str):
        self.sources = [first]

    def propose(self, ctx):
        from agent.types import Proposal
        if not self.sources:
            raise Crash()
        return Proposal(source=self.sources.pop(0), changed="broken attempt")

    def observe(self, proposal, result, accepted):
        pass


def test_resume_after_a_crash_in_the_writing_phase(tmp_path, server):
    c = make_candidates(tmp_path / "cands")
    cfg = config(tmp_path)
    loop, audit = make_loop(tmp_path, CrashingProposer(c["syntax.py"].read_text()), cfg=cfg, **FROM_REF)
    with pytest.raises(Crash):
        loop.run()
    assert audit.records("run-1", "run_end") == [] and len(audit.records("run-1", "iteration")) == 1
    audit.close()

    server.push(reply(seed_source(), "correct"))
    loop, audit = make_loop(tmp_path, llm(server), cfg=cfg, limits=BudgetLimits(iterations=2), **FROM_REF)
    out = loop.run(resume=True)
    recs = [r.body["record"] for r in audit.records("run-1", "iteration")]
    assert [(r["iteration"], r["verdict"]) for r in recs] == [(0, "rejected"), (1, "accepted")]
    assert [a.body["from_reference"] for a in audit.records("run-1", "accepted")] == [True]
    assert "#0 rejected at lint" in user_text(server.requests[0])   # the earlier session's failure
    assert out.exit_code == 0 and Path(out.incumbent_path).read_text() == seed_source()
    assert "seed" not in {r.body["role"] for r in audit.records("run-1", "evaluation")}
    assert audit.verify().ok


def test_the_loop_refuses_a_proposer_that_cannot_write_from_nothing(tmp_path):
    with pytest.raises(ValueError, match="--from-reference needs a model"):
        make_loop(tmp_path, SearchProposer(), **FROM_REF)


def test_cli_search_exits_2_and_says_how_to_pass_a_model(tmp_path):
    app, home = make_app(), f"home={tmp_path / 'home'}"
    shapes = str(tiny_shapes(tmp_path))
    r = invoke(app, "optimize", "--op", OP, "--shapes", shapes, "--from-reference", "-c", home)
    assert r.exit_code == 2 and "--from-reference needs a model" in r.output and "--model PROVIDER/MODEL" in r.output
    r = invoke(app, "optimize", "--op", OP, "--shapes", shapes, "--from-reference", "--model", "openai/m",
               "--seed-kernel", load_operator(OP).seed_path, "-c", home)
    assert r.exit_code == 2 and "drop --seed-kernel" in r.output
    r = invoke(app, "optimize", "--op", OP, "--shapes", shapes, "--reference-tries", "3", "-c", home)
    assert r.exit_code == 2 and "add --from-reference" in r.output


def test_cli_gives_up_with_exit_4_and_a_resume_with_more_tries_goes_on(tmp_path):
    c = make_candidates(tmp_path / "cands")
    script = ["--script", str(c["syntax.py"]), "--script", load_operator(OP).seed_path]
    settings = ["-c", f"home={tmp_path / 'home'}", "-c", "knowledge.enabled=false", "-c", "sandbox.holdout=false",
                "-c", "sandbox.trials=1"]
    app = make_app()
    r = invoke(app, "optimize", "--op", OP, "--shapes", str(tiny_shapes(tmp_path)), "--from-reference",
               "--proposer", "scripted", *script, "--reference-tries", "1", *settings)
    assert r.exit_code == 4 and "gave up: none of the 1 kernels" in r.output
    r = invoke(app, "optimize", "--resume", "last", "--reference-tries", "3", *script, *settings)
    assert r.exit_code == 0, r.output
    assert "#1: the first kernel written from the reference passed every gate" in r.output


def test_reference_source_is_the_reference_and_what_it_uses_never_the_input_makers():
    text = '''import torch
from benchmarks.inputs import helper

SCALE = 2.0
UNUSED = 3


def holdout_dims(rng, hot):
    return [{"N": 7}]


def _twice(x):
    return SCALE * helper(x)


@torch.no_grad()
def reference(x):
    holdout_dims(None, None)
    return _twice(x)
'''
    out = reference_source(text)
    assert out.index("import torch") < out.index("SCALE = 2.0") < out.index("def _twice") < out.index("@torch.no_grad")
    assert "from benchmarks.inputs import helper" in out
    assert "UNUSED" not in out and "def holdout_dims" not in out
    with pytest.raises(ValueError, match="no module-level `def reference"):
        reference_source("x = 1\n")


@pytest.mark.parametrize("op", ["rms_norm", "fused_moe", "top_k_top_p_filter", "fused_add_rms_norm",
                                "reshape_and_cache", "causal_conv1d_update"])
def test_every_prompt_from_the_reference_renders(op):
    spec = load_operator(op)
    contract = contract_for(spec, spec.select("hot"))
    text = build_prompt(ProposalContext(contract, "", None, ""))[1]["content"]
    assert "def reference(" in text and "holdout_dims" not in text and f"def {op}(" in text
    first = spec.select("hot")[0]
    line = next(x for x in text.splitlines() if x.startswith(f"- {first.id}: "))
    if spec.output_names is None:            # one output: its shape, as before
        assert line.startswith(f"- {first.id}: a new tensor of shape ("), line
    else:                                    # every output by name
        assert all(f"{n} of shape (" in line for n in spec.output_names), line
        assert ("None" in line) == (spec.output_names == ()), line
    assert all(m in line for m in spec.mutates) and ("in place" in line) == bool(spec.mutates), line
