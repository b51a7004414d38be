"""The llm proposer against a real local HTTP server (tests/agent/fake_llm_server.py).

The official openai and anthropic SDKs and litellm talk to it over sockets on 127.0.0.1; nothing is
mocked. Usage is checked against the token counts the server reported.
"""
import pytest
from fake_llm_server import FakeLLMServer, Scripted

from agent.config import LLMConfig
from agent.proposers import PROPOSERS, make_proposer
from agent.proposers.llm import LLMProposer
from agent.proposers.llm_clients import ProposerConfigError
from agent.proposers.llm_extract import extract_kernel, scrub_secrets, summary_lines
from agent.types import IterationRecord, OperatorContract, ProposalContext, Snippet

OPENAI_SECRET = "sk-test-OPENAI-0123456789abcdefSECRET"
ANTHROPIC_SECRET = "sk-ant-test-0123456789abcdefSECRET"

KERNEL = '''import torch
import triton
import triton.language as tl

CONFIGS = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def _rms_norm_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def rms_norm(x, weight, eps):
    y = torch.empty_like(x)
    _rms_norm_kernel[(1,)](x, y, x.numel(), BLOCK=CONFIGS["BLOCK"], num_warps=CONFIGS["num_warps"])
    return y
'''
GOOD_REPLY = f"CHANGED: wider BLOCK\nWHY: memory-bound, fewer programs\n\n```python\n{KERNEL}```\nDone."
NO_KERNEL_REPLY = "I think you should increase num_warps to 8; that should help the memory-bound shapes."

CONTRACT = OperatorContract(
    name="rms_norm", signature="rms_norm(x[T,H], weight[H], eps=1e-6) -> [T,H]",
    description="CONTRACT-DESCRIPTION: normalize rows.", arg_names=("x", "weight", "eps"),
    tolerances={"bf16": {"atol": 0.02, "rtol": 0.02, "rel_l2": 0.01}},
    shapes=({"id": "T64-H4096", "dims": {"T": 64, "H": 4096}, "dtype": "bf16", "weight": 1.0},))
CTX = ProposalContext(
    contract=CONTRACT, incumbent_source="# INCUMBENT-MARKER\n" + KERNEL, incumbent_score=0.5,
    feedback="FEEDBACK-MARKER: att=0.500 memory-bound", iteration=2,
    snippets=(Snippet("SNIPPET-MARKER: use evict_first", "notes", "", "Eviction"),),
    memory=(IterationRecord(1, "abc", "MEMORY-MARKER num_warps 4 -> 8", "", "rejected", "correctness", None,
                            lesson="wrong"),))


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_SECRET)
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with FakeLLMServer() as srv:
        yield srv


def _proposer(model, srv, **cfg):
    base = srv.base_url if model.startswith("anthropic/") else srv.openai_base
    return LLMProposer(model, LLMConfig(api_base=base, **{"timeout_s": 10.0, **cfg}), backoff_s=0.01)


def _messages(request):
    return request.body["messages"]


def _prompt_text(request) -> str:
    body = request.body
    system = body.get("system") or []
    texts = [b["text"] for b in system] if isinstance(system, list) else [system]
    return "\n".join(texts + [m["content"] for m in body["messages"]])


def _assert_prompt_complete(request):
    text = _prompt_text(request)
    for marker in ("rms_norm(x[T,H], weight[H], eps=1e-6) -> [T,H]", "CONTRACT-DESCRIPTION", "rel_l2=0.01",
                   "INCUMBENT-MARKER", "FEEDBACK-MARKER", "SNIPPET-MARKER", "[notes] Eviction",
                   "MEMORY-MARKER"):
        assert marker in text, marker


def _assert_no_secret(srv, proposal):
    assert OPENAI_SECRET not in srv.bodies_text() and ANTHROPIC_SECRET not in srv.bodies_text()
    blob = repr(proposal)
    assert OPENAI_SECRET not in blob and ANTHROPIC_SECRET not in blob


@pytest.mark.parametrize("stream", [False, True])
def test_openai_path_returns_the_kernel_with_server_usage(server, stream):
    server.push(Scripted(GOOD_REPLY, prompt_tokens=1234, completion_tokens=321))
    p = _proposer("openai/my-local-model", server, stream=stream)
    proposal = p.propose(CTX)
    assert proposal.source == KERNEL and proposal.error is None
    assert proposal.changed == "wider BLOCK" and proposal.why == "memory-bound, fewer programs"
    u = proposal.usage
    assert (u.prompt_tokens, u.completion_tokens, u.calls, u.retries, u.malformed_replies) == (1234, 321, 1, 0, 0)
    assert u.usd == 0.0 and "no price known" in proposal.meta["cost_note"]
    [req] = server.requests
    assert req.path == "/v1/chat/completions" and bool(req.body.get("stream")) == stream
    assert req.headers["authorization"] == f"Bearer {OPENAI_SECRET}"     # the key came from the environment
    _assert_prompt_complete(req)
    _assert_no_secret(server, proposal)


def test_a_stream_without_usage_counts_zero_tokens_and_says_so(server):
    server.push(Scripted(GOOD_REPLY, usage_in_stream=False))
    proposal = _proposer("openai/gpt-4o", server, stream=True).propose(CTX)
    assert proposal.source == KERNEL
    assert (proposal.usage.prompt_tokens, proposal.usage.usd, proposal.usage.calls) == (0, 0.0, 1)
    assert "no token usage" in proposal.meta["cost_note"]


def test_openai_known_model_is_priced_from_the_table(server):
    server.push(Scripted(GOOD_REPLY, prompt_tokens=2_000, completion_tokens=500))
    proposal = _proposer("openai/gpt-4o", server).propose(CTX)
    assert proposal.usage.usd == pytest.approx((2_000 * 2.5 + 500 * 10.0) / 1e6)


def test_configured_prices_override_the_table(server):
    server.push(Scripted(GOOD_REPLY, prompt_tokens=1_000_000, completion_tokens=1_000_000))
    proposal = _proposer("openai/gpt-4o", server, usd_per_mtok_in=1.0, usd_per_mtok_out=3.0).propose(CTX)
    assert proposal.usage.usd == pytest.approx(4.0)


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_errors_are_retried_then_succeed(server, status):
    server.push(Scripted(status=status), Scripted(GOOD_REPLY, prompt_tokens=10, completion_tokens=5))
    proposal = _proposer("openai/m", server).propose(CTX)
    assert proposal.source == KERNEL
    assert (proposal.usage.retries, proposal.usage.calls, proposal.usage.prompt_tokens) == (1, 1, 10)
    assert len(server.requests) == 2


def test_a_timeout_is_retried(server):
    server.push(Scripted(GOOD_REPLY, delay_s=1.5), Scripted(GOOD_REPLY, prompt_tokens=7, completion_tokens=3))
    proposal = _proposer("openai/m", server, timeout_s=0.3).propose(CTX)
    assert proposal.source == KERNEL and proposal.usage.retries == 1 and proposal.usage.prompt_tokens == 7


def test_bad_request_is_not_retried(server):
    server.push(Scripted(status=400, error_message="context too long"), Scripted(GOOD_REPLY))
    proposal = _proposer("openai/m", server).propose(CTX)
    assert proposal.source is None and "HTTP 400" in proposal.error and "context too long" in proposal.error
    assert len(server.requests) == 1 and proposal.usage.retries == 0
    assert not proposal.meta.get("final")


def test_rejected_key_is_final_and_scrubbed(server):
    server.push(Scripted(status=401, error_message=f"Incorrect API key provided: {OPENAI_SECRET}"))
    proposal = _proposer("openai/m", server).propose(CTX)
    assert proposal.source is None and proposal.meta["final"] is True
    assert "HTTP 401" in proposal.error and "[REDACTED]" in proposal.error
    assert len(server.requests) == 1
    _assert_no_secret(server, proposal)


def test_retries_run_out(server):
    server.push(*[Scripted(status=502) for _ in range(3)])
    proposal = _proposer("openai/m", server, max_retries=2).propose(CTX)
    assert proposal.source is None and "after 2 retries" in proposal.error
    assert proposal.usage.retries == 2 and proposal.usage.calls == 0 and len(server.requests) == 3


def test_a_reply_without_kernel_gets_one_corrective_turn(server):
    server.push(Scripted(NO_KERNEL_REPLY, prompt_tokens=100, completion_tokens=20),
                Scripted(GOOD_REPLY, prompt_tokens=150, completion_tokens=300))
    proposal = _proposer("openai/m", server).propose(CTX)
    assert proposal.source == KERNEL
    u = proposal.usage
    assert (u.malformed_replies, u.calls, u.prompt_tokens, u.completion_tokens) == (1, 2, 250, 320)
    first, second = server.requests
    assert len(_messages(first)) == 2
    roles = [m["role"] for m in _messages(second)]
    assert roles == ["system", "user", "assistant", "user"]
    assert _messages(second)[2]["content"] == NO_KERNEL_REPLY
    assert "no complete candidate file" in _messages(second)[3]["content"]


def test_two_replies_without_kernel_give_up_after_the_single_correction(server):
    server.push(Scripted(NO_KERNEL_REPLY), Scripted(NO_KERNEL_REPLY), Scripted(GOOD_REPLY))
    proposal = _proposer("openai/m", server).propose(CTX)
    assert proposal.source is None and "no kernel" in proposal.error
    assert proposal.usage.malformed_replies == 2 and proposal.usage.calls == 2
    assert len(server.requests) == 2       # corrected once, never twice


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_path_caches_the_system_block(server, stream):
    server.push(Scripted(GOOD_REPLY, prompt_tokens=200, completion_tokens=400, cache_creation_tokens=3000,
                         cache_read_tokens=1000))
    proposal = _proposer("anthropic/claude-sonnet-4-6", server, stream=stream).propose(CTX)
    assert proposal.source == KERNEL
    [req] = server.requests
    assert req.path == "/v1/messages" and bool(req.body.get("stream")) == stream
    system = req.body["system"]
    assert system[-1]["cache_control"] == {"type": "ephemeral"}
    assert "CONTRACT-DESCRIPTION" in system[0]["text"] and "INCUMBENT-MARKER" not in system[0]["text"]
    assert [m["role"] for m in req.body["messages"]] == ["user"]
    # The key travels in a header (x-api-key, or Authorization: Bearer in anthropic 2.x), never in the body.
    assert ANTHROPIC_SECRET in (req.headers.get("x-api-key", ""), req.headers.get("authorization", "")[7:])
    _assert_prompt_complete(req)
    u = proposal.usage
    assert (u.prompt_tokens, u.completion_tokens, u.calls) == (200 + 3000 + 1000, 400, 1)
    # claude-sonnet-4-6: $3 / $15 per Mtok; cache writes 1.25x and reads 0.1x the input price.
    assert u.usd == pytest.approx((200 * 3 + 400 * 15 + 3000 * 3 * 1.25 + 1000 * 3 * 0.1) / 1e6)
    _assert_no_secret(server, proposal)


def test_anthropic_corrective_turn_and_retry(server):
    server.push(Scripted(status=429), Scripted(NO_KERNEL_REPLY), Scripted(GOOD_REPLY))
    proposal = _proposer("anthropic/claude-x", server).propose(CTX)
    assert proposal.source == KERNEL
    assert (proposal.usage.retries, proposal.usage.malformed_replies, proposal.usage.calls) == (1, 1, 2)
    assert [m["role"] for m in server.requests[-1].body["messages"]] == ["user", "assistant", "user"]


@pytest.mark.parametrize("stream", [False, True])
def test_litellm_path_with_configured_prices(server, stream):
    server.push(Scripted(GOOD_REPLY, prompt_tokens=1000, completion_tokens=2000))
    p = _proposer("hosted_vllm/fake-model", server, stream=stream, usd_per_mtok_in=1.0, usd_per_mtok_out=2.0)
    proposal = p.propose(CTX)
    assert proposal.source == KERNEL
    [req] = server.requests
    assert req.path == "/v1/chat/completions" and bool(req.body.get("stream")) == stream
    _assert_prompt_complete(req)
    u = proposal.usage
    assert (u.prompt_tokens, u.completion_tokens, u.calls) == (1000, 2000, 1)
    assert u.usd == pytest.approx((1000 * 1.0 + 2000 * 2.0) / 1e6)
    _assert_no_secret(server, proposal)


def test_the_litellm_prefix_forces_litellm_for_an_openai_model(server):
    server.push(Scripted(GOOD_REPLY, prompt_tokens=1_000, completion_tokens=100))
    p = _proposer("litellm/openai/gpt-4o", server)
    assert type(p.client).__name__ == "LiteLLMClient" and p.client.model == "openai/gpt-4o"
    proposal = p.propose(CTX)
    assert proposal.source == KERNEL and server.requests[0].body["model"] == "gpt-4o"
    assert proposal.usage.usd == pytest.approx((1_000 * 2.5 + 100 * 10.0) / 1e6)   # litellm's own price map
    _assert_no_secret(server, proposal)


def test_litellm_unknown_model_costs_zero_with_a_note_and_retries(server):
    server.push(Scripted(status=500), Scripted(GOOD_REPLY, prompt_tokens=11, completion_tokens=22))
    proposal = _proposer("hosted_vllm/unpriced-model", server).propose(CTX)
    assert proposal.source == KERNEL and proposal.usage.retries == 1 and len(server.requests) == 2
    assert proposal.usage.usd == 0.0 and "usd_per_mtok" in proposal.meta["cost_note"]


def test_table_builds_proposers_by_name(server):
    p = make_proposer("llm", model="openai/m", cfg=LLMConfig(api_base=server.openai_base), seed=3)
    assert isinstance(p, LLMProposer) and p.name == "llm"
    assert set(PROPOSERS) >= {"llm", "search", "scripted"}
    with pytest.raises(ValueError, match="choose one of: llm, scripted, search"):
        make_proposer("genetic")


def test_missing_key_and_missing_provider_are_usage_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProposerConfigError, match="OPENAI_API_KEY"):
        LLMProposer("openai/gpt-4o", LLMConfig())
    with pytest.raises(ProposerConfigError, match="provider prefix"):
        LLMProposer("gpt-4o", LLMConfig())


# ---- reply parsing ------------------------------------------------------------------------------

def test_extract_tolerates_missing_tag_prose_and_several_blocks():
    quoted = "```python\nx = tl.load(ptr)\n```"
    reply = f"Here is the idea:\n{quoted}\nand the full file:\n```\n{KERNEL}```\nThat is all."
    assert extract_kernel(reply, "rms_norm") == KERNEL


def test_extract_prefers_the_last_complete_file_and_skips_shell_blocks():
    older = KERNEL.replace("1024", "512")
    reply = f"```python\n{older}```\n```bash\npython bench.py\n```\nBetter:\n```py\n{KERNEL}```"
    assert extract_kernel(reply, "rms_norm") == KERNEL


def test_extract_handles_an_unterminated_final_fence():
    assert extract_kernel(f"CHANGED: x\n```python\n{KERNEL}", "rms_norm") == KERNEL


def test_extract_rejects_blocks_without_the_function_or_a_jit_kernel():
    assert extract_kernel(NO_KERNEL_REPLY, "rms_norm") is None
    assert extract_kernel(f"```python\n{KERNEL}```", "silu_and_mul") is None
    no_jit = KERNEL.replace("@triton.jit\n", "")
    assert extract_kernel(f"```python\n{no_jit}```", "rms_norm") is None


def test_extract_reads_bare_code_without_fences():
    assert extract_kernel(KERNEL + "\nThis version is faster.", "rms_norm") == KERNEL


def test_summary_lines():
    assert summary_lines(GOOD_REPLY) == ("wider BLOCK", "memory-bound, fewer programs")
    assert summary_lines("Use more warps.\n```python\nx\n```") == ("Use more warps.", "")


def test_scrub_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "plain-value-without-shape-42")
    text = ("key plain-value-without-shape-42; Authorization: Bearer abcdefghijk123; "
            "sk-proj-ABCDEFGH12345678; api_key='zzzzzzzzzzzz'")
    out = scrub_secrets(text)
    for secret in ("plain-value-without-shape-42", "abcdefghijk123", "sk-proj-ABCDEFGH12345678", "zzzzzzzzzzzz"):
        assert secret not in out
    assert out.count("[REDACTED]") == 4


def test_samples_are_parallel_requests_at_stepped_temperatures_each_with_its_usage(server):
    from agent.proposers.base import propose_samples
    from agent.proposers.llm import sample_temperatures
    assert sample_temperatures(0.7, 3) == [0.7, 0.8, 0.9] and sample_temperatures(1.45, 2) == [1.45, 1.5]
    server.push(Scripted(GOOD_REPLY, prompt_tokens=100, completion_tokens=10),
                Scripted(GOOD_REPLY.replace("1024", "2048"), prompt_tokens=200, completion_tokens=20),
                Scripted(NO_KERNEL_REPLY, prompt_tokens=300, completion_tokens=30),
                Scripted(NO_KERNEL_REPLY, prompt_tokens=400, completion_tokens=40))
    proposer = _proposer("openai/gpt-4o", server, temperature=0.7)
    out = propose_samples(proposer, CTX, 3)
    assert sorted(p.meta["sample"] for p in out) == [0, 1, 2]
    assert [p.meta["temperature"] for p in out] == [0.7, 0.8, 0.9]
    got = sorted(r.body["temperature"] for r in server.requests)
    assert len(got) == 4 and set(got) <= {0.7, 0.8, 0.9} and len(set(got)) == 3   # one sample took a corrective turn
    assert sum(p.source is not None for p in out) == 2
    # every sample's tokens are counted, the failed one's two calls included
    assert sum(p.usage.tokens for p in out) == proposer.total.tokens == 110 + 220 + 330 + 440
    assert sum(p.usage.calls for p in out) == 4
