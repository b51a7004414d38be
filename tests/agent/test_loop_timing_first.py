"""Timing first (acceptance.timing_first): a candidate is timed alone before its correctness trials; a
clearly slower one stops there, every other one still gets every gate before acceptance. The real
sandbox under the interpreter decides the gates; the timing model of test_loop scores what passes."""
from __future__ import annotations

import pytest
from test_loop import (RecordingProposer, ScoredSandbox, _scale_rows, config, iteration_bodies, make_candidates,
                       make_loop, seed_source)

from agent.budget import BudgetLimits
from agent.config import ConfigError, load_config

pytestmark = pytest.mark.interpreter


class SearchLike(RecordingProposer):
    timing_first = True


def _run(tmp_path, mode, names=("slower.py", "wrong.py", "faster.py", "quarter.py")):
    c = make_candidates(tmp_path / "cands")
    c["quarter.py"] = tmp_path / "cands" / "quarter.py"      # slower than the seed, and than faster.py
    c["quarter.py"].write_text(_scale_rows(seed_source(), 0.25))
    proposer = SearchLike([str(c[n]) for n in names])
    scored = ScoredSandbox()
    loop, audit = make_loop(tmp_path, proposer, cfg=config(tmp_path, f"acceptance.timing_first={mode}"),
                            evaluate=scored, limits=BudgetLimits(iterations=len(names)))
    loop.run()
    return scored, iteration_bodies(audit), c


def test_a_slower_candidate_stops_at_its_timing_and_the_rest_get_every_gate(tmp_path):
    scored, bodies, c = _run(tmp_path, "always")
    recs = [b["record"] for b in bodies]
    got = [(r["iteration"], r["verdict"], r["failed_stage"], (b.get("decision") or {}).get("rule"))
           for r, b in zip(recs, bodies)]
    assert got[1] == (1, "rejected", "acceptance", "timed-screen"), got
    assert "correctness trials were not run" in recs[1]["lesson"]
    assert got[2][:3] == (2, "rejected", "correctness"), got          # timed fine, then failed its trials
    assert got[3][:2] == (3, "accepted"), got
    assert got[4][3] == "timed-screen", got                           # against the new incumbent, timed anew
    full = [q for q in scored.requests if q.correctness]
    sources = [q.source for q in full]
    assert c["slower.py"].read_text() not in sources                  # never given the full evaluation
    assert c["wrong.py"].read_text() in sources and c["faster.py"].read_text() in sources
    # the incumbent is timed alone once per incumbent: the seed, then the accepted kernel
    light = [q.source for q in scored.requests if not q.correctness]
    assert light.count(c["faster.py"].read_text()) >= 2                # as a candidate, then as the incumbent
    # a candidate's compile cache starts from the incumbent's; the incumbent's own requests start from nothing
    seed = seed_source()
    by_source = {}
    for q in scored.requests:
        by_source.setdefault(q.source, set()).add(q.compile_cache_from)
    assert by_source[seed] == {None}
    assert by_source[c["slower.py"].read_text()] == {seed} and by_source[c["wrong.py"].read_text()] == {seed}
    assert by_source[c["quarter.py"].read_text()] == {c["faster.py"].read_text()}
    assert not any(q.private_compile for q in scored.requests)          # no fresh confirmation without a GPU A/B


def test_never_gives_every_candidate_the_full_evaluation_first(tmp_path):
    scored, bodies, c = _run(tmp_path, "never", names=("slower.py",))
    rules = [(b.get("decision") or {}).get("rule") for b in bodies]
    assert "timed-screen" not in rules and rules[1] == "screen"      # the screen after the full evaluation
    assert [q.correctness for q in scored.requests] == [True, True]  # the seed, then the candidate in full


def test_an_unknown_mode_is_refused_with_the_choices(tmp_path):
    with pytest.raises(ConfigError, match="timing_first='sometimes'; choose auto, always or never"):
        load_config(None, [f"home={tmp_path}", "acceptance.timing_first=sometimes"])
