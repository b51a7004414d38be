"""A proposer that raises on every proposal costs no GPU time, so a run with a GPU-minutes budget used to record
empty iterations until it was killed (446 in 15 s on an H100, the search's compile pool dead). After
PROPOSER_RAISE_LIMIT raises in a row the run stops as on a fatal proposer error: exit 3, the reason, the last
error, and how to continue. A proposal that did not raise (an answer without a kernel) starts the count again."""
from __future__ import annotations

import pytest
from test_loop import RecordingProposer, iteration_bodies, make_loop

from agent.budget import BudgetLimits
from agent.loop import PROPOSER_RAISE_LIMIT

pytestmark = pytest.mark.interpreter


def test_a_proposer_that_keeps_raising_stops_the_run_with_exit_3(tmp_path):
    steps = [("raise", "HTTP 529 overloaded")] * (PROPOSER_RAISE_LIMIT - 1) + [("error", "no code block")] \
        + [("raise", "compile pool broken")] * (PROPOSER_RAISE_LIMIT + 5)
    loop, audit = make_loop(tmp_path, RecordingProposer(steps), limits=BudgetLimits(iterations=3 * PROPOSER_RAISE_LIMIT))
    out = loop.run()
    recs = [b["record"] for b in iteration_bodies(audit)]
    assert len(recs) == 1 + 2 * PROPOSER_RAISE_LIMIT        # the seed, the first streak, the answer, the second
    assert out.exit_code == 3
    end = [r.body for r in audit.records("run-1", "run_end")]
    assert len(end) == 1 and end[0]["exit_code"] == 3, end
    reason = end[0]["reason"]
    assert f"raised on the last {PROPOSER_RAISE_LIMIT} proposals (limit {PROPOSER_RAISE_LIMIT})" in reason, reason
    assert "compile pool broken" in reason and "aka optimize --resume run-1" in reason
