"""Proposers by short name (DESIGN.md section 6): `make_proposer("search")`, `make_proposer("llm",
model="anthropic/claude-sonnet-4-6", cfg=cfg)`. Implementations are imported only when chosen, so
the offline search never loads an LLM SDK."""
from __future__ import annotations

import importlib
from typing import Any

from agent.proposers.base import Proposer

PROPOSERS: dict[str, str] = {
    "llm": "agent.proposers.llm:LLMProposer",
    "search": "agent.proposers.search:SearchProposer",
    "scripted": "agent.proposers.scripted:ScriptedProposer",
}


def make_proposer(name: str, **kwargs: Any) -> Proposer:
    """The proposer called `name`, built with kwargs; an unknown name lists the known ones."""
    target = PROPOSERS.get(name)
    if target is None:
        raise ValueError(f"unknown proposer {name!r}; choose one of: {', '.join(sorted(PROPOSERS))}")
    module_name, cls_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(**kwargs)


__all__ = ["PROPOSERS", "Proposer", "make_proposer"]
