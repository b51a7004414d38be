"""The proposer interface: what the loop asks of anything that writes candidates."""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agent.types import Proposal, ProposalContext


@runtime_checkable
class Proposer(Protocol):
    """Writes the next candidate from a context, and hears how it fared.

    `propose` never raises for a bad model reply or an exhausted search: it returns
    Proposal(source=None, error=...), with meta["final"]=True when nothing will ever follow.
    `observe` receives the EvalResult of a proposal (None when it was never evaluated) and whether
    the loop accepted it as the new incumbent."""

    name: str

    def propose(self, ctx: ProposalContext) -> Proposal: ...

    def observe(self, proposal: Proposal, result: Any, accepted: bool) -> None: ...
