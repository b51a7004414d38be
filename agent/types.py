"""Plain values that pass between the loop, the proposers, memory and feedback.

Frozen dataclasses only (DESIGN.md section 2); the loop owns all state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Usage:
    """LLM usage of one proposal (zeros for offline proposers)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    calls: int = 0
    retries: int = 0
    malformed_replies: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(*(a + b for a, b in zip(
            (self.prompt_tokens, self.completion_tokens, self.usd, self.calls, self.retries, self.malformed_replies),
            (other.prompt_tokens, other.completion_tokens, other.usd, other.calls, other.retries, other.malformed_replies))))

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def format_usd(usd: float) -> str:
    """Dollars with enough digits: a run of cheap calls costs fractions of a cent ($0.0042, not $0.00)."""
    if usd == 0:
        return "$0.00"
    return f"${usd:.2f}" if abs(usd) >= 1 else f"${usd:.3g}"


@dataclass(frozen=True)
class Snippet:
    """One retrieved knowledge-base chunk, as the prompt builder receives it."""

    text: str
    layer: str                 # "reference" | "notes" | "api"
    source: str = ""           # path or package; hidden from prompts when provenance is hidden
    title: str = ""
    chunk_id: str = ""
    score: float = 0.0


@dataclass(frozen=True)
class IterationRecord:
    """What one iteration left behind: the unit of memory and of optimization dropout."""

    iteration: int
    candidate_hash: str        # content hash of the candidate source ("" when none was produced)
    changed: str               # what changed, one line (from the proposer)
    why: str                   # the proposer's rationale, short
    verdict: str               # "accepted" | "rejected" | "error"
    failed_stage: str | None
    score: float | None        # weighted attainment over the run's shapes
    per_shape: dict[str, float] = field(default_factory=dict)   # visible shape id -> attainment
    lesson: str = ""           # one line the next prompt can use
    is_seed: bool = False
    accepted: bool = False

    def to_prompt_line(self) -> str:
        s = "n/a" if self.score is None else f"{self.score:.3f}"
        stage = f" at {self.failed_stage}" if self.failed_stage else ""
        return f"#{self.iteration} {self.verdict}{stage} score={s}: {self.changed} -- {self.lesson}"


@dataclass(frozen=True)
class OperatorContract:
    """What a proposer is told of the operator: semantics, signature, dtypes, tolerances."""

    name: str
    signature: str
    description: str
    arg_names: tuple[str, ...]
    tolerances: dict[str, dict[str, float]]
    shapes: tuple[dict[str, Any], ...]       # visible (never hold-out) shapes: id, dims, dtype, weight
    reference: str = ""                      # the PyTorch reference's source (agent/from_reference.py)
    outputs: tuple[dict[str, Any], ...] = ()  # per visible shape: id, shape, dtype of what the call returns
    output_layout: str = "contiguous"        # the operator's OUTPUT_LAYOUT ("any": consumers take any strides)


@dataclass(frozen=True)
class ProposalContext:
    """Everything a proposer may use. Masked memory records are simply not in `memory`."""

    contract: OperatorContract
    incumbent_source: str
    incumbent_score: float | None
    feedback: str                              # compact text built by agent/feedback.py
    incumbent_result: dict[str, Any] | None = None   # EvalResult.to_json() with hold-out shapes removed
    snippets: tuple[Snippet, ...] = ()
    memory: tuple[IterationRecord, ...] = ()
    iteration: int = 0
    seed: int = 0


@dataclass(frozen=True)
class Proposal:
    """A proposer's answer: a candidate source, or an error the loop records and moves past."""

    source: str | None
    changed: str = ""
    why: str = ""
    usage: Usage = Usage()
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)   # e.g. the config a search move applied
