"""Prices for the models the openai and anthropic SDK paths know by name (litellm prices its own).

USD per million tokens (input, output), as listed in litellm 1.110's bundled price map
(model_prices_and_context_window_backup.json, read 2026-11-29). Prices change: LLMConfig's
usd_per_mtok_in/out override this table, and a model missing from it costs $0 with a note, so
a budget in dollars is never silently wrong without saying so.
"""
from __future__ import annotations

import re

# Keys are model names with any date suffix removed ("claude-sonnet-4-5-20250929" -> "claude-sonnet-4-5").
# Exact match after that, never a bare prefix: "gpt-5" must not price "gpt-5-pro" (12x dearer).
PRICES_USD_PER_MTOK: dict[str, tuple[float, float]] = {
    # openai
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "o3": (2.0, 8.0),
    "o3-mini": (1.1, 4.4),
    "o4-mini": (1.1, 4.4),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-5.1": (1.25, 10.0),
    "gpt-5.2": (1.75, 14.0),
    "gpt-5.4": (2.5, 15.0),
    "gpt-5.4-mini": (0.75, 4.5),
    "gpt-5.5": (5.0, 30.0),
    # anthropic
    "claude-opus-4": (15.0, 75.0),
    "claude-opus-4-0": (15.0, 75.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-sonnet-4-0": (3.0, 15.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
}

# Anthropic bills cache writes at 1.25x and cache reads at 0.1x the input price (5-minute cache).
ANTHROPIC_CACHE_WRITE_FACTOR = 1.25
ANTHROPIC_CACHE_READ_FACTOR = 0.1

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def canonical_model_name(model: str) -> str:
    return _DATE_SUFFIX.sub("", model.strip().lower())


def price_per_mtok(model: str, usd_in: float | None, usd_out: float | None) -> tuple[float, float, str]:
    """(input, output, note): configured prices win, then the table; unknown -> zeros and a note."""
    table = PRICES_USD_PER_MTOK.get(canonical_model_name(model))
    if usd_in is not None or usd_out is not None:
        base = table or (0.0, 0.0)
        return (usd_in if usd_in is not None else base[0], usd_out if usd_out is not None else base[1], "")
    if table is None:
        return 0.0, 0.0, (f"no price known for {model!r}: counted as $0; "
                          f"set llm.usd_per_mtok_in and llm.usd_per_mtok_out to budget in dollars")
    return table[0], table[1], ""


def cost_usd(prompt_tokens: int, completion_tokens: int, usd_in: float, usd_out: float,
             cache_write_tokens: int = 0, cache_read_tokens: int = 0) -> float:
    """Prompt tokens here exclude cached ones; cache writes and reads are billed at Anthropic's factors."""
    return (prompt_tokens * usd_in + completion_tokens * usd_out
            + cache_write_tokens * usd_in * ANTHROPIC_CACHE_WRITE_FACTOR
            + cache_read_tokens * usd_in * ANTHROPIC_CACHE_READ_FACTOR) / 1e6
