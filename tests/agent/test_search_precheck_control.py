"""The search's compile check is judged against the incumbent's. On the GPU machines (Triton 3.6, NumPy 2.5) the
check's tiny interpreter run failed on six seeds before any kernel compiled, every move of those operators was
dropped, and `aka optimize` proposed nothing for minutes. A tiny run that fails on the incumbent too says nothing
about a move: the move goes to the GPU with a note. A move whose own run fails where the incumbent's does not is
still dropped. A compile pool whose worker died is replaced, so later checks still run. And each drop is reported
as it happens (the loop prints it), since a run of them can take minutes before a proposal goes out."""
import os

from test_search_precheck import BUCKETED, _bucket, _ctx, _propose, _result, compile_at_a_tiny_shape

from agent.proposers.search import SearchProposer
from agent.proposers.search_prefetch import CompileCheck, CompilePool

# Every tiny run fails before a kernel is compiled, the incumbent's too: what an interpreter that cannot run the
# operator does to every candidate.
NOTHING_RUNS = BUCKETED.replace('''def pick(m):
''', '''def pick(m):
    raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
''')
# The incumbent's tiny run passes; a move to fewer stages in bucket 1 makes the launcher raise in its own run.
FEWER_STAGES_RAISE = BUCKETED.replace('''def pick(m):
''', '''def pick(m):
    if CONFIGS["buckets"][1][1]["num_stages"] < 4:
        raise ValueError("the launcher needs 4 stages")
''')


def test_a_tiny_run_that_fails_on_the_incumbent_too_drops_nothing_and_says_so():
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2, precheck=True)
    try:
        handed = _propose(proposer, _ctx(NOTHING_RUNS, _result("graph")), 3)
    finally:
        proposer.close()
    assert proposer.dropped == [] and len(handed) == 3, proposer.dropped[:3]
    for p in handed:
        assert "the check's tiny run fails on the incumbent too" in p.meta["precheck"], p.meta
        assert "only 0-dimensional arrays" in p.meta["precheck"]


def test_a_move_whose_own_tiny_run_fails_is_still_dropped():
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2, precheck=True)
    try:
        handed = _propose(proposer, _ctx(FEWER_STAGES_RAISE, _result("graph", low_occupancy=True)), 3)
    finally:
        proposer.close()
    reasons = dict(proposer.dropped)
    why = reasons.get("num_stages in CONFIGS['buckets'][1][1]: 4 -> 3", "")
    assert "does not compile" in why and "the launcher needs 4 stages" in why, reasons
    assert handed and all(_bucket(p)[1] >= 4 for p in handed), [_bucket(p) for p in handed]
    assert all("fails on the incumbent too" not in p.meta.get("precheck", "") for p in handed)


def dies(source: str, op: str) -> CompileCheck:
    os._exit(1)            # the worker is killed mid-check (a SIGKILL, the OOM killer)


def compiles(source: str, op: str) -> CompileCheck:
    return CompileCheck(True, note=f"checked {op}", compiled=True)


def test_a_pool_whose_worker_died_is_replaced_for_the_next_checks():
    pool = CompilePool(dies, max_workers=1)
    try:
        pool.submit("a", "x", "mm")
        first = pool.result("a")
        assert first.ok and "BrokenProcessPool" in first.note, first      # the dead check leaves it to the GPU
        pool.compile_fn = compiles
        pool.submit("b", "y", "mm")                                        # raised BrokenProcessPool before
        assert pool.result("b") == CompileCheck(True, note="checked mm", compiled=True)
    finally:
        pool.close()


def niceness(source: str, op: str) -> CompileCheck:
    return CompileCheck(True, note=str(os.nice(0)), compiled=True)


def test_the_pools_checks_run_nicer_than_the_loop_that_times_kernels():
    from agent.proposers.search_prefetch import POOL_NICENESS
    pool = CompilePool(niceness, max_workers=1)
    try:
        pool.submit("a", "x", "mm")
        assert int(pool.result("a").note) == min(19, os.nice(0) + POOL_NICENESS)
    finally:
        pool.close()


def test_each_drop_is_reported_as_it_happens_and_the_loop_prints_it(tmp_path, capsys):
    from test_loop import make_loop
    seen = []
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2, precheck=True)
    try:
        make_loop(tmp_path, proposer)                  # the loop wires the search's drops to its progress lines
        proposer.on_drop("BLOCK_N: 64 -> 128", "does not compile: ptxas")
        assert "search: dropped before the GPU: BLOCK_N: 64 -> 128: does not compile: ptxas" in capsys.readouterr().err
        proposer.on_drop = lambda changed, why: seen.append((changed, why))
        _propose(proposer, _ctx(FEWER_STAGES_RAISE, _result("graph", low_occupancy=True)), 1)
    finally:
        proposer.close()
    assert seen and seen == proposer.dropped, (seen, proposer.dropped)
