"""The one hold-out redaction: what a proposer may learn of the hidden shapes (counts, never dims).

`HoldoutFilter.leaks(text)` decides whether a line gives a hidden shape away: its id, a number
(a dim, or a product of dims: a tensor size in an error message) that hidden shapes have and visible
ones do not, or any other text about hold-outs except the loop's own generic lines. Over-hiding is
the safe side: a visible row whose message is withheld only loses detail.

`redact_holdout(result)` is the copy of an EvalResult every prompt, lesson and proposer context is
built from (agent/loop.py, agent/memory.py lessons); agent/feedback.py renders with the same filter.
"""
from __future__ import annotations

import copy
import itertools
import math
import re

from sandbox.verdict import EvalResult, ShapeResult

HIDDEN_NOTE = "a hidden shape failed (details withheld: make the kernel correct for any size)"
_SAFE_HIDDEN_LINE = re.compile(r"^(a hidden shape\b[^\n]*|\d+ hidden shapes? checked, \d+ failed)$")


def _numbers(dims_list: list[dict]) -> set[int]:
    """Every dim value and every product of a shape's dims."""
    out: set[int] = set()
    for dims in dims_list:
        values = [int(v) for v in dims.values()]
        for n in range(1, len(values) + 1):
            out.update(math.prod(c) for c in itertools.combinations(values, n))
    return out


def _all_dims(row: ShapeResult) -> list[dict]:
    return [dict(row.dims)] + ([dict(row.ran_dims)] if getattr(row, "ran_dims", None) else [])


class HoldoutFilter:
    def __init__(self, result: EvalResult, contract=None):
        """`contract`: an OperatorContract whose (visible) shapes' numbers may be named freely."""
        hidden = [s for s in result.shapes if s.holdout]
        visible = [d for s in result.visible_shapes() for d in _all_dims(s)]
        if contract is not None:
            visible += [dict(s.get("dims", {})) for s in contract.shapes]
        self.ids = {s.id for s in hidden if s.id}
        # Both the hot dims and the (interpreter's) dims that ran: an error message names the sizes that ran.
        self.secrets = {str(n) for n in _numbers([d for s in hidden for d in _all_dims(s)]) - _numbers(visible)
                        if n > 1}

    def leaks(self, text: str) -> bool:
        if not text:
            return False
        if any(re.search(rf"(?<![\w-]){re.escape(i)}(?![\w-])", text) for i in self.ids):
            return True
        if any(n in self.secrets for n in re.findall(r"\d+", text)):
            return True
        return bool(re.search(r"(?i)hold-?out|hidden shape", text)) and not _SAFE_HIDDEN_LINE.match(text.strip())


def hidden_line(row: ShapeResult) -> str:
    """A failed hidden shape as a proposer may hear of it: its error metrics, never its dims."""
    detail = []
    if row.max_rel_err is not None:
        detail.append(f"max_rel_err {row.max_rel_err:.3g}")
    if row.rel_l2 is not None:
        detail.append(f"rel_l2 {row.rel_l2:.3g}")
    if not detail and row.error:
        head = row.error.split(":", 1)[0].strip()
        detail.append(head if re.fullmatch(r"[A-Za-z_][\w .-]{0,40}", head) and not re.search(r"\d", head)
                      else "failed")
    return "a hidden shape: " + (", ".join(detail) or "failed")


def redact_holdout(result: EvalResult, keep_hidden_rows: bool = False) -> EvalResult:
    """A copy of `result` a proposer may see: no hold-out rows, no text that names them.

    `keep_hidden_rows`: leave the hold-out rows in (for agent.feedback, which reports them only as
    counts) while still scrubbing every reason, flag and output tail."""
    out = copy.deepcopy(result)
    hidden = [s for s in out.shapes if s.holdout]
    if not hidden:
        return out
    hide = HoldoutFilter(out)
    failed_hidden = [s for s in hidden if s.error is not None]
    generic = [hidden_line(s) for s in failed_hidden] or ["a hidden shape"]

    def scrub(lines: list[str]) -> list[str]:
        kept = [line for line in lines if not hide.leaks(line)]
        return kept + (generic if len(kept) < len(lines) else [])

    out.reasons = list(dict.fromkeys(scrub(out.reasons)))
    out.flags = list(dict.fromkeys(scrub(out.flags)))
    out.stdout_tail = "" if hide.leaks(out.stdout_tail) else out.stdout_tail
    out.stderr_tail = "" if hide.leaks(out.stderr_tail) else out.stderr_tail
    if not keep_hidden_rows:
        out.shapes = [s for s in out.shapes if not s.holdout]
        out.flags.append(f"{len(hidden)} hidden shapes checked, {len(failed_hidden)} failed")
    return out
