"""The LLM proposer: prompt a model with the contract, the incumbent and the evidence; read a kernel back.

One proposal is one conversation: the prompt (agent/feedback.build_prompt), the model's reply, and
when the reply holds no kernel, ONE short corrective turn in the same conversation; a second reply
without a kernel ends the proposal with Proposal(source=None, error=...). Each malformed reply is
counted in Usage.malformed_replies.

Usage accounting (agent.types.Usage), per proposal: `calls` are model calls that returned a reply
(the billed ones), `retries` the failed attempts that were retried (429, 5xx, timeouts), tokens and
dollars as the provider reported them (see llm_clients for how each SDK is priced). The loop
enforces budgets; the proposer only reports.

Samples (`aka optimize --samples N`, agent/proposers/base.py): `propose_many(ctx, n)` sends the n
conversations in parallel threads, sample k at temperature llm.temperature + 0.1 k (capped at 1.5):
the first sample is what a single proposal would be, the others explore further. Each sample is a
Proposal with its own Usage, so the loop's token and dollar budgets count every one. (The clients take
no per-request seed; providers that ignore temperature, such as Anthropic's Messages API here,
still differ between samples by their own sampling.)

Errors: transient failures are retried with backoff inside the client call; when retries run out
the proposal carries the error. Rejected credentials or an unknown model (401/403/404) cannot get
better by repeating, so that proposal is marked final and the loop stops. Every error message is
scrubbed of anything that looks like an API key before it is recorded.
"""
from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import LLMConfig
from agent.feedback import build_prompt, corrective_message
from agent.proposers.llm_clients import (FATAL_STATUS, ChatClient, ChatReply, ProposerConfigError,
                                         call_with_retries, is_transient, make_client, retry_line, status_of)
from agent.proposers.llm_extract import extract_kernel, scrub_secrets, summary_lines
from agent.types import Proposal, ProposalContext, Usage

_API_MODULES = frozenset({"openai", "anthropic", "litellm", "httpx", "httpcore"})
TEMPERATURE_STEP = 0.1     # between the samples of one round
MAX_TEMPERATURE = 1.5      # hotter replies stop being kernels more often than they find new ones


def sample_temperatures(base: float, n: int) -> list[float]:
    """The temperature of each of n samples: the configured one first, then 0.1 hotter each."""
    return [round(min(MAX_TEMPERATURE, max(base, base + TEMPERATURE_STEP * k)), 3) for k in range(n)]


def _is_api_error(exc: BaseException) -> bool:
    return status_of(exc) is not None or type(exc).__module__.split(".")[0] in _API_MODULES or is_transient(exc)


@dataclass
class _Tally:
    """Mutable counters of one proposal, frozen into a Usage at the end."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    calls: int = 0
    retries: int = 0
    malformed: int = 0
    cost_note: str = ""
    started: float = field(default_factory=time.monotonic)   # the proposal's deadline counts from here

    def add(self, reply: ChatReply) -> None:
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.usd += reply.usd
        self.cost_note = self.cost_note or reply.cost_note

    def usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens, self.usd, self.calls, self.retries, self.malformed)


class LLMProposer:
    name = "llm"
    writes_from_reference = True   # without an incumbent the prompt asks for a first kernel (aka optimize --from-reference)

    def __init__(self, model: str, cfg: Any = None, seed: int | None = None, client: ChatClient | None = None,
                 backoff_s: float = 1.0, max_backoff_s: float = 60.0, templates_dir: str | Path | None = None):
        """`model` is PROVIDER/MODEL; `cfg` a Config or an LLMConfig (defaults when None). `seed` is
        accepted for the proposer table's uniform call: sampling is the model's, not ours."""
        self.model = model
        self.cfg: LLMConfig = getattr(cfg, "llm", cfg) or LLMConfig()
        self.client = client or make_client(model, self.cfg)
        self._injected = client is not None      # a given client has one temperature: samples share it
        self._sample_clients: dict[float, ChatClient] = {self.cfg.temperature: self.client}
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.templates_dir = templates_dir
        self.total = Usage()

    # ---- protocol -----------------------------------------------------------------------------
    def propose(self, ctx: ProposalContext) -> Proposal:
        return self._done(self._conversation(ctx, self.client, {}))

    def propose_many(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """n samples for one round, requested in parallel (module docstring)."""
        temps = sample_temperatures(self.cfg.temperature, n)
        jobs = [(self._client_at(t), {"sample": k, "temperature": self.cfg.temperature if self._injected else t})
                for k, t in enumerate(temps)]
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="llm-sample") as pool:
            proposals = list(pool.map(lambda job: self._conversation(ctx, *job), jobs))
        return [self._done(p) for p in proposals]

    def _client_at(self, temperature: float) -> ChatClient:
        if self._injected:
            return self.client
        if temperature not in self._sample_clients:
            self._sample_clients[temperature] = make_client(self.model, dataclasses.replace(
                self.cfg, temperature=temperature))
        return self._sample_clients[temperature]

    def _conversation(self, ctx: ProposalContext, client: ChatClient, extra: dict[str, Any]) -> Proposal:
        tally = _Tally()
        messages = build_prompt(ctx, self.templates_dir)

        def meta() -> dict[str, Any]:      # read when the proposal is made: the tally fills in as calls return
            return {**self._meta(tally), **extra}
        try:
            reply = self._call(client, messages, tally)
            source = extract_kernel(reply.text, ctx.contract.name)
            if source is None:
                tally.malformed += 1
                messages = messages + [{"role": "assistant", "content": reply.text.strip() or "(empty reply)"},
                                       corrective_message(ctx.contract, self.templates_dir)]
                reply = self._call(client, messages, tally)
                source = extract_kernel(reply.text, ctx.contract.name)
                if source is None:
                    tally.malformed += 1
                    return Proposal(
                        source=None, usage=tally.usage(), meta=meta(),
                        error=f"the model's reply held no kernel twice (a ```python block defining "
                              f"{ctx.contract.name}(...) and a @triton.jit kernel), even after a corrective turn")
        except ProposerConfigError as exc:
            return Proposal(source=None, usage=tally.usage(), error=scrub_secrets(str(exc)),
                            meta={**meta(), "final": True, "fatal": True})
        except Exception as exc:
            if not _is_api_error(exc):
                raise                       # a bug of ours, not the provider's: the loop records it
            status = status_of(exc)
            fatal = status in FATAL_STATUS
            hint = (" (check the API key and the model name; aka stops here)" if fatal else
                    f" after {tally.retries} retries" if is_transient(exc) else "")
            return Proposal(
                source=None, usage=tally.usage(),
                error=scrub_secrets(f"{self.model}: {type(exc).__name__}"
                                    f"{f' (HTTP {status})' if status else ''}: {exc}")[:1000] + hint,
                meta={**meta(), **({"final": True, "fatal": True} if fatal else {})})
        changed, why = summary_lines(reply.text)
        return Proposal(source=source, changed=changed or f"revision by {self.model}", why=why,
                        usage=tally.usage(), meta=meta())

    def observe(self, proposal: Proposal, result: Any, accepted: bool) -> None:
        """Nothing to learn between calls: the next context carries the memory records."""

    # ---- parts --------------------------------------------------------------------------------
    def _call(self, client: ChatClient, messages: list[dict[str, str]], tally: _Tally) -> ChatReply:
        say = retry_line(self.model, getattr(client, "endpoint", "?"), self.cfg.max_retries)

        def on_retry(exc: BaseException, n: int, wait: float) -> None:
            tally.retries += 1
            say(exc, n, wait)

        reply = call_with_retries(lambda: client.complete(messages), max_retries=self.cfg.max_retries,
                                  backoff_s=self.backoff_s, max_backoff_s=self.max_backoff_s, on_retry=on_retry,
                                  deadline=tally.started + self.cfg.proposal_timeout_s, attempt_s=self.cfg.timeout_s,
                                  max_retry_after_s=self.cfg.max_retry_after_s)
        tally.add(reply)
        return reply

    def _meta(self, tally: _Tally) -> dict[str, Any]:
        meta: dict[str, Any] = {"proposer": self.name, "model": self.model}
        if tally.cost_note:
            meta["cost_note"] = tally.cost_note
        return meta

    def _done(self, proposal: Proposal) -> Proposal:
        self.total = self.total + proposal.usage
        return proposal
