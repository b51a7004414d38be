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
    the loop accepted it as the new incumbent.

    A proposer that can write a kernel with no incumbent to start from (`aka optimize --from-reference`:
    the context's incumbent_source is "") says so with a class attribute `writes_from_reference = True`;
    the loop refuses the others (the search can only rewrite a kernel it was given)."""

    name: str

    def propose(self, ctx: ProposalContext) -> Proposal: ...

    def observe(self, proposal: Proposal, result: Any, accepted: bool) -> None: ...


def propose_samples(proposer: Proposer, ctx: ProposalContext, n: int) -> list[Proposal]:
    """n candidates for one round (`aka optimize --samples N`). A proposer with `propose_many(ctx, n)`
    answers them itself (the LLM proposer sends its n requests in parallel); any other is asked n times in
    a row (the search then gives its n best-ranked moves: each call takes the next one off its ranking).
    The round ends early at a final proposal (nothing more will follow)."""
    if n < 1:
        raise ValueError(f"n={n}: a round needs at least one proposal")
    many = getattr(proposer, "propose_many", None)
    if n > 1 and callable(many):
        out = list(many(ctx, n))
        if not out:
            raise RuntimeError(f"proposer {proposer.name}.propose_many returned no proposal")
        return out
    out = []
    for _ in range(n):
        out.append(proposer.propose(ctx))
        if out[-1].meta.get("final"):
            break
    return out
