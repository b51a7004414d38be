"""A candidate that does what the incumbent does at every scored shape is not a change, whatever a timer reads.

The A/B re-measure (sandbox/ab.py) accepts a candidate no faster than the incumbent with probability alpha, and
the offline search proposes many whose only difference is a setting the scored shapes never use (5 of 70 in
session 31's softmax run: sandbox/call_trace.py). So before any A/B the loop compares the call traces that both
kernels' evaluations recorded at each visible shape (every Triton launch with its code, specialization, grid and
arguments, and every torch op, in order): equal at all of them, the candidate is rejected as a no-op, with no GPU
time spent on its A/B and no chance of a recorded gain that is not there. A shape without a trace (one that
failed, a call recorded untraced) leaves the decision to the timers.
"""
from __future__ import annotations

from agent.acceptance import Decision
from sandbox.verdict import EvalResult

RULE_NO_OP = "no-op"


def shape_traces(result: EvalResult | None) -> dict[str, str]:
    """Visible shape id -> its call trace digest; shapes without one are left out."""
    if result is None:
        return {}
    return {s.id: s.launches.trace_digest for s in result.visible_shapes()
            if s.passed and s.launches is not None and s.launches.trace_digest}


def no_op_decision(incumbent: EvalResult | None, candidate: EvalResult) -> Decision | None:
    """A rejection when the candidate's call traces equal the incumbent's at every visible shape, else None."""
    shapes = [s.id for s in candidate.visible_shapes()]
    mine, theirs = shape_traces(candidate), shape_traces(incumbent)
    if not shapes or any(i not in mine or mine[i] != theirs.get(i) for i in shapes):
        return None
    return Decision(False, RULE_NO_OP,
                    f"changes nothing the scored shapes run: at all {len(shapes)} the same Triton launches (code, "
                    f"constexprs, warps, stages, grid, arguments) and torch ops, in the same order, as the "
                    f"incumbent; an A/B of the same work can only measure noise",
                    details={"trace_digests": mine})
