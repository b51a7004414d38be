"""Fail fast, exit honestly: the provider probe before the seed, Retry-After, the proposal deadline, retry
lines on stderr, and exit codes 2 (set-up) and 3 (fatal provider error mid-run).

Against the real local server of tests/agent/fake_llm_server.py (and a port nothing listens on)."""
from __future__ import annotations

import pytest
from fake_llm_server import FakeLLMServer, Scripted, refused_port
from typer.testing import CliRunner

from agent.config import LLMConfig
from agent.proposers.llm import LLMProposer
from agent.proposers.llm_clients import ProbeError, call_with_retries, probe

SECRET = "sk-test-SETUP-0123456789abcdefSECRET"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeLLMServer() as srv:
        yield srv


def cfg(base: str, **kw) -> LLMConfig:
    return LLMConfig(api_base=base, **{"timeout_s": 5.0, **kw})


# ---- probe -------------------------------------------------------------------------------------------
def test_probe_passes_on_a_working_provider_with_one_tiny_request(server):
    server.push(Scripted("ok", prompt_tokens=5, completion_tokens=1))
    assert probe("openai/m", cfg(server.openai_base)) == ""
    assert len(server.requests) == 1 and server.requests[0].body["max_tokens"] <= 16


@pytest.mark.parametrize("status, fix", [(401, "check the API key"), (404, "check the model name"),
                                         (400, "check the provider prefix and model name")])
def test_probe_stops_on_a_refusal_naming_url_and_model_never_the_key(server, status, fix):
    server.push(Scripted(status=status, error_message=f"bad key {SECRET}"))
    with pytest.raises(ProbeError) as e:
        probe("openai/m", cfg(server.openai_base))
    text = str(e.value)
    assert f"HTTP {status}" in text and server.openai_base in text and "openai/m" in text and fix in text
    assert SECRET not in text
    assert len(server.requests) == 1        # no retries of a refusal


def test_probe_of_a_refused_port_stops_at_once():
    base = f"http://127.0.0.1:{refused_port()}/v1"
    with pytest.raises(ProbeError, match="check the base URL"):
        probe("openai/m", cfg(base))


def test_probe_takes_a_rate_limit_as_a_warning(server):
    server.push(Scripted(status=429, headers={"Retry-After": "3"}))
    note = probe("openai/m", cfg(server.openai_base))
    assert "HTTP 429" in note and "goes on" in note


# ---- retries: Retry-After, the deadline, a line on stderr ------------------------------------------
KERNEL_REPLY = ("CHANGED: x\nWHY: y\n\n```python\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                "def _k(x):\n    pass\n\n\ndef rms_norm(x, weight, eps):\n    _k[(1,)](x)\n    return x\n```\n")


def test_retry_after_is_honoured_capped_and_each_retry_prints_a_line(server, capsys):
    from test_llm_proposer import CTX
    server.push(Scripted(status=429, headers={"Retry-After": "0.2"}), Scripted(status=503, headers={"Retry-After": "7"}),
                Scripted(KERNEL_REPLY))
    proposer = LLMProposer("openai/m", cfg(server.openai_base, max_retry_after_s=0.3), backoff_s=0.01)
    proposal = proposer.propose(CTX)
    assert proposal.source is not None and proposal.usage.retries == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"llm: openai/m at {server.openai_base}: HTTP 429; retry 1/4 in 0.2 s"
    assert err[1].endswith("HTTP 503; retry 2/4 in 0.3 s")     # 7 s asked, capped at 0.3


class Unavailable(Exception):
    status_code = 503


def test_no_retry_starts_that_could_end_past_the_deadline():
    import time
    calls = []

    def fail():
        calls.append(1)
        raise Unavailable("busy")
    with pytest.raises(Unavailable):
        call_with_retries(fail, max_retries=5, backoff_s=0.001, max_backoff_s=0.001)
    assert len(calls) == 6
    calls.clear()
    with pytest.raises(Unavailable):   # one attempt may take 10 s and only 5 s are left: no retry
        call_with_retries(fail, max_retries=5, backoff_s=0.001, max_backoff_s=0.001,
                          deadline=time.monotonic() + 5, attempt_s=10)
    assert len(calls) == 1


def test_the_default_worst_case_per_proposal_is_under_five_minutes():
    c = LLMConfig()
    assert c.proposal_timeout_s < 300 and c.timeout_s < c.proposal_timeout_s


# ---- exit codes ----------------------------------------------------------------------------------------
def optimize(tmp_path, *args):
    from agent.cli import app
    return CliRunner().invoke(app, ["optimize", "--op", "rms_norm", "-c", f"home={tmp_path / 'home'}",
                                    "-c", "knowledge.enabled=false", *args])


def test_a_refused_base_url_exits_2_before_the_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    base = f"http://127.0.0.1:{refused_port()}/v1"
    out = optimize(tmp_path, "--model", "openai/m", "--api-base", base)
    assert out.exit_code == 2, out.output
    assert base in out.output and "openai/m" in out.output and SECRET not in out.output
    assert not (tmp_path / "home" / "runs").exists()            # no seed was evaluated


def test_an_unknown_provider_exits_2(tmp_path):
    out = optimize(tmp_path, "--model", "nosuchprovider/x")
    assert out.exit_code == 2, out.output
    assert "nosuchprovider/x" in out.output


def test_api_base_must_be_a_url(tmp_path):
    out = optimize(tmp_path, "--model", "openai/m", "--api-base", "localhost:8000")
    assert out.exit_code == 2 and "not an http(s) URL" in out.output


def test_a_key_revoked_mid_run_stops_the_loop_with_exit_code_3(tmp_path, server):
    from test_run_records import make_loop
    server.push(Scripted(status=401, error_message="key revoked"))
    proposer = LLMProposer("openai/m", cfg(server.openai_base), backoff_s=0.01)
    loop, audit = make_loop(tmp_path / "home", proposer, iterations=5)
    out = loop.run()
    assert out.exit_code == 3 and out.reason.startswith("fatal proposer error") and "HTTP 401" in out.reason
    assert out.iterations == 1 and len(server.requests) == 1
