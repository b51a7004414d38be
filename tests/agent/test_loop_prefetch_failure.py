"""A proposer's prefetch is an aid: when it fails, as a SIGTERM to the whole process group leaves its compile
pool (BrokenProcessPool, an H100 run of 2026-12-06 that ended in a traceback with no end record), the iteration is
still evaluated and recorded, and a stop requested meanwhile still ends the run with its record and exit code."""
from __future__ import annotations

import dataclasses
import signal
from concurrent.futures.process import BrokenProcessPool

import pytest
from test_loop import RecordingProposer, ScoredSandbox, iteration_bodies, make_candidates, make_loop

from agent.budget import BudgetLimits

pytestmark = pytest.mark.interpreter


class BrokenPrefetch(RecordingProposer):
    """The recording proposer with the search's prefetch hook, whose compile pool has died."""

    def __init__(self, steps):
        super().__init__(steps)
        self.prefetches = 0

    def prefetch(self, n: int) -> int:
        self.prefetches += 1
        raise BrokenProcessPool("A child process terminated abruptly, the process pool is not usable anymore")


class AsIfTimed:
    """The real sandbox (interpreter) with its results marked as GPU-timed: the loop prefetches only then."""

    def __init__(self):
        self.scored = ScoredSandbox()

    def __call__(self, req):
        return dataclasses.replace(self.scored(req), interpreter=False)


def test_a_failed_prefetch_leaves_the_iteration_recorded_and_a_stop_ends_the_run_cleanly(tmp_path, capsys):
    c = make_candidates(tmp_path / "cands")
    proposer = BrokenPrefetch([("signal", signal.SIGTERM, str(c["faster.py"])), str(c["slower.py"])])
    loop, audit = make_loop(tmp_path, proposer, evaluate=AsIfTimed(), limits=BudgetLimits(iterations=3))
    out = loop.run()
    assert proposer.prefetches == 1
    recs = [b["record"] for b in iteration_bodies(audit)]
    # the candidate passed every gate; the stop came before its A/B re-measurement, so the incumbent stays
    assert [(r["iteration"], r["verdict"]) for r in recs] == [(0, "accepted"), (1, "rejected")]
    assert "stop requested before the A/B re-measurement" in recs[1]["lesson"]
    assert out.exit_code == 128 + signal.SIGTERM
    end = [r.body for r in audit.records("run-1", "run_end")]
    assert len(end) == 1 and end[0]["exit_code"] == 128 + signal.SIGTERM, end
    assert "proposer.prefetch raised BrokenProcessPool" in capsys.readouterr().err
