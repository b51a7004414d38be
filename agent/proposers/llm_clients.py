"""Chat clients behind the llm proposer, one per SDK, chosen by the model string's provider.

  openai/MODEL      official openai SDK; also every OpenAI-compatible server (vLLM, SGLang, Ollama,
                    OpenRouter) through LLMConfig.api_base or OPENAI_BASE_URL
  anthropic/MODEL   official anthropic SDK; the system block (instructions + operator contract,
                    the long stable part of every prompt) carries cache_control, so repeated
                    iterations read it from Anthropic's prompt cache at a tenth of the price
  litellm/MODEL     litellm with MODEL as litellm spells it (forces litellm for any provider)
  OTHER/MODEL       litellm (gemini/..., openrouter/..., hosted_vllm/..., ...)

Each client makes one call (`complete`) and reports tokens and dollars; retries live in
`call_with_retries` (exponential backoff or the server's Retry-After on 429, 5xx and timeouts,
never on other 4xx, within the proposal's deadline), so every SDK's own retrying is switched off
and each attempt is counted once. `probe` makes one tiny request before a run starts, so a bad
provider, model, key or base URL stops the run before the seed is evaluated.
API keys are read from the environment (through agent.config.env) and handed to the SDK only.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

from agent.config import LLMConfig, env
from agent.proposers.llm_prices import cost_usd, price_per_mtok

T = TypeVar("T")

# Retried: rate limits, request timeouts and server errors. Not retried: 400 (bad request),
# 401/403 (key), 404 (model name): repeating those only burns the budget.
RETRY_STATUS = frozenset({408, 429})
TRANSIENT_ERROR_NAMES = frozenset({"APITimeoutError", "APIConnectionError", "Timeout", "TimeoutException",
                                   "ConnectError", "ReadTimeout", "ReadError", "RemoteProtocolError"})
FATAL_STATUS = frozenset({401, 403, 404})


class ProposerConfigError(ValueError):
    """A setting the user must fix (missing key, no provider prefix). A ValueError, so the CLI reports
    it as a usage error."""


@dataclass(frozen=True)
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    cost_note: str = ""          # why usd is 0 when it is not really free


class ChatClient(Protocol):
    model: str

    def complete(self, messages: list[dict[str, str]]) -> ChatReply: ...


# --- retries -------------------------------------------------------------------------------------

def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_transient(exc: BaseException) -> bool:
    status = status_of(exc)
    if status is not None:
        return status in RETRY_STATUS or status >= 500
    return any(c.__name__ in TRANSIENT_ERROR_NAMES for c in type(exc).__mro__)


def retry_after_s(exc: BaseException) -> float | None:
    """The server's Retry-After (seconds, or retry-after-ms), when its reply carried one."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None   # an HTTP date: rare from LLM providers; the exponential backoff applies


def describe_error(exc: BaseException) -> str:
    status = status_of(exc)
    return f"HTTP {status}" if status is not None else type(exc).__name__


def call_with_retries(fn: Callable[[], T], *, max_retries: int, backoff_s: float, max_backoff_s: float,
                      on_retry: Callable[[BaseException, int, float], None] = lambda e, n, w: None,
                      deadline: float | None = None, attempt_s: float = 0.0, max_retry_after_s: float = 60.0) -> T:
    """Run fn, retrying transient failures up to max_retries times.

    The wait before retry n is the server's Retry-After when it sent one (capped at max_retry_after_s),
    else exponential backoff (backoff_s * 2**(n-1), capped at max_backoff_s). With `deadline` (a
    time.monotonic() value) no retry starts that could end past it: `attempt_s` is how long one
    attempt may take (the request timeout), so the whole call never outlives the deadline."""
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            attempt += 1
            if not is_transient(exc) or attempt > max_retries:
                raise
            hinted = retry_after_s(exc)
            wait = min(hinted, max_retry_after_s) if hinted is not None else min(max_backoff_s,
                                                                                 backoff_s * 2 ** (attempt - 1))
            if deadline is not None and time.monotonic() + wait + attempt_s > deadline:
                raise
            on_retry(exc, attempt, wait)
            time.sleep(wait)


def retry_line(model: str, endpoint: str, max_retries: int) -> Callable[[BaseException, int, float], None]:
    """An on_retry that prints one line per retry on stderr (so a piped run is not silent for minutes)."""
    def say(exc: BaseException, n: int, wait: float) -> None:
        print(f"llm: {model} at {endpoint}: {describe_error(exc)}; retry {n}/{max_retries} in {wait:.1f} s",
              file=sys.stderr, flush=True)
    return say


# --- clients -------------------------------------------------------------------------------------

def _needs_completion_tokens_param(model: str) -> bool:
    """OpenAI's reasoning models reject max_tokens and any temperature but 1."""
    return bool(re.match(r"^(o\d|gpt-5)", model))


class OpenAIClient:
    """The official openai SDK; with a base URL it serves any OpenAI-compatible server."""

    def __init__(self, model: str, cfg: LLMConfig):
        import openai

        self.model, self.cfg = model, cfg
        self.base_url = cfg.api_base or env("OPENAI_BASE_URL")
        key = env("OPENAI_API_KEY")
        if not key:
            if not self.base_url:
                raise ProposerConfigError(
                    f"model openai/{model} needs OPENAI_API_KEY in the environment; export it, point "
                    f"--api-base at an OpenAI-compatible server, or use the offline 'search' proposer")
            key = "EMPTY"   # local servers (vLLM, Ollama) accept any key but the SDK demands one
        self.endpoint = self.base_url or "https://api.openai.com/v1"
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=cfg.timeout_s, max_retries=0)
        self._prices = price_per_mtok(model, cfg.usd_per_mtok_in, cfg.usd_per_mtok_out)

    def _params(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if not self.base_url and _needs_completion_tokens_param(self.model):
            params["max_completion_tokens"] = self.cfg.max_tokens
        else:
            params["max_tokens"] = self.cfg.max_tokens
            params["temperature"] = self.cfg.temperature
        return params

    def complete(self, messages: list[dict[str, str]]) -> ChatReply:
        params = self._params(messages)
        if self.cfg.stream:
            stream = self._client.chat.completions.create(
                **params, stream=True, stream_options={"include_usage": True})
            parts, usage = [], None
            for chunk in stream:
                if chunk.choices:
                    parts.append(chunk.choices[0].delta.content or "")
                if getattr(chunk, "usage", None):
                    usage = chunk.usage
            text = "".join(parts)
        else:
            resp = self._client.chat.completions.create(**params)
            text, usage = resp.choices[0].message.content or "", resp.usage
        p_in, p_out, note = self._prices
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        if usage is None:
            note = "the server reported no token usage: tokens and cost counted as 0"
        return ChatReply(text, pt, ct, cost_usd(pt, ct, p_in, p_out), note)


class AnthropicClient:
    """The official anthropic SDK, with the system block marked for prompt caching."""

    def __init__(self, model: str, cfg: LLMConfig):
        import anthropic

        self.model, self.cfg = model, cfg
        base_url = cfg.api_base or env("ANTHROPIC_BASE_URL")
        key = env("ANTHROPIC_API_KEY")
        if not key:
            raise ProposerConfigError(
                f"model anthropic/{model} needs ANTHROPIC_API_KEY in the environment; export it, "
                f"or use the offline 'search' proposer")
        self.endpoint = base_url or "https://api.anthropic.com"
        self._client = anthropic.Anthropic(api_key=key, base_url=base_url, timeout=cfg.timeout_s, max_retries=0)
        self._prices = price_per_mtok(model, cfg.usd_per_mtok_in, cfg.usd_per_mtok_out)

    def complete(self, messages: list[dict[str, str]]) -> ChatReply:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        # No temperature: anthropic 2.x's Messages API no longer takes one (its SDK refuses the argument).
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.cfg.max_tokens, "messages": turns}
        if system:
            params["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        if self.cfg.stream:
            with self._client.messages.stream(**params) as stream:
                msg = stream.get_final_message()
        else:
            msg = self._client.messages.create(**params)
        text = "".join(getattr(b, "text", "") for b in msg.content)
        u = msg.usage
        fresh, out = int(u.input_tokens or 0), int(u.output_tokens or 0)
        written = int(getattr(u, "cache_creation_input_tokens", 0) or 0)
        read = int(getattr(u, "cache_read_input_tokens", 0) or 0)
        p_in, p_out, note = self._prices
        return ChatReply(text, fresh + written + read, out, cost_usd(fresh, out, p_in, p_out, written, read), note)


def import_litellm():
    """Import litellm without its network fetch of the price map (4-5 s and a failure offline)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    # register_model warns about cache prices on every custom model; the note in Usage says enough.
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    return litellm


class LiteLLMClient:
    """Any provider litellm knows; models it cannot price are registered so cost never raises."""

    def __init__(self, model: str, cfg: LLMConfig):
        self.model, self.cfg = model, cfg
        self.endpoint = cfg.api_base or f"litellm's endpoint for {model.split('/', 1)[0]}"
        self._litellm = import_litellm()
        self.cost_note = self._ensure_priced()

    def _ensure_priced(self) -> str:
        litellm, cfg = self._litellm, self.cfg
        provider = self.model.split("/", 1)[0]
        configured = cfg.usd_per_mtok_in is not None or cfg.usd_per_mtok_out is not None
        if not configured:
            try:
                litellm.get_model_info(self.model)
                return ""
            except Exception:
                pass
        litellm.register_model({self.model: {
            "input_cost_per_token": (cfg.usd_per_mtok_in or 0.0) / 1e6,
            "output_cost_per_token": (cfg.usd_per_mtok_out or 0.0) / 1e6,
            "litellm_provider": provider, "mode": "chat"}})
        if configured:
            return ""
        return (f"litellm has no price for {self.model!r}: counted as $0; "
                f"set llm.usd_per_mtok_in and llm.usd_per_mtok_out to budget in dollars")

    def complete(self, messages: list[dict[str, str]]) -> ChatReply:
        litellm, cfg = self._litellm, self.cfg
        params: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": cfg.max_tokens,
                                  "temperature": cfg.temperature, "timeout": cfg.timeout_s,
                                  "max_retries": 0, "num_retries": 0, "drop_params": True}
        if cfg.api_base:
            params["api_base"] = cfg.api_base
        if cfg.stream:
            chunks = list(litellm.completion(**params, stream=True, stream_options={"include_usage": True}))
            resp = litellm.stream_chunk_builder(chunks, messages=messages)
        else:
            resp = litellm.completion(**params)
        text = resp.choices[0].message.content or ""
        usage = getattr(resp, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        note = self.cost_note
        try:
            usd = float(litellm.completion_cost(completion_response=resp, model=self.model) or 0.0)
        except Exception as exc:   # pricing must never lose a kernel the model already wrote
            usd, note = 0.0, f"litellm could not price the reply ({type(exc).__name__}): counted as $0"
        return ChatReply(text, pt, ct, usd, note)


# Providers served by their own SDK; every other provider prefix goes through litellm.
SDK_CLIENTS: dict[str, type] = {"openai": OpenAIClient, "anthropic": AnthropicClient}


def make_client(model: str, cfg: LLMConfig) -> ChatClient:
    """`PROVIDER/MODEL` -> a client: openai and anthropic by their SDKs, anything else by litellm."""
    if "/" not in model or not model.split("/", 1)[1]:
        raise ProposerConfigError(
            f"model {model!r} needs a provider prefix, e.g. openai/gpt-5, anthropic/claude-sonnet-4-6, "
            f"gemini/gemini-2.5-pro (any litellm provider), or litellm/<litellm model string>")
    provider, name = model.split("/", 1)
    if provider in SDK_CLIENTS:
        return SDK_CLIENTS[provider](name, cfg)
    if provider == "litellm":
        return LiteLLMClient(name, cfg)
    return LiteLLMClient(model, cfg)


# --- probe ---------------------------------------------------------------------------------------

class ProbeError(RuntimeError):
    """The provider cannot serve this run: the message names the URL and model tried (never the key)."""


PROBE_MAX_TOKENS = 8
PROBE_TIMEOUT_S = 30.0


def probe(model: str, cfg: LLMConfig) -> str:
    """One tiny request (a few tokens) before the run starts. Returns a note ("" when all is well);
    raises ProposerConfigError or ProbeError when the provider, model, key or URL is wrong.

    A rate limit or server error still proves the key and model were understood, so it is a
    warning, not a stop; a refused connection, a timeout or any other 4xx stops the run."""
    import dataclasses
    quick = dataclasses.replace(cfg, max_tokens=PROBE_MAX_TOKENS, stream=False,
                                timeout_s=min(cfg.timeout_s, PROBE_TIMEOUT_S))
    client = make_client(model, quick)
    where = f"model {model} at {getattr(client, 'endpoint', '?')}"
    try:
        client.complete([{"role": "user", "content": "Reply with the word ok."}])
    except ProposerConfigError:
        raise
    except Exception as exc:
        from agent.proposers.llm_extract import scrub_secrets
        status = status_of(exc)
        message = scrub_secrets(str(exc))[:300]
        if status is not None and (status in RETRY_STATUS or status >= 500):
            return f"probe of {where}: HTTP {status} ({message}); the run goes on and retries"
        fix = ("check the API key" if status in (401, 403) else
               "check the model name" if status == 404 else
               "check the base URL (--api-base) and that the server is running" if status is None else
               "check the provider prefix and model name")
        raise ProbeError(f"the LLM provider refused {where}: {describe_error(exc)}: {message}; {fix}") from None
    return ""
