"""Coarse before fine: slots badly tuned the same way in every bucket move together, and an improving
direction is followed at a growing stride."""
from agent.proposers.search import SearchProposer
from agent.proposers.search_space import read_configs
from agent.types import OperatorContract, ProposalContext
from sandbox.verdict import EvalResult

# A flat config copied into four buckets and two GEMMs, as fused_moe's recovery study starts.
FLAT = '''import triton
import triton.language as tl

CONFIGS = {
    "buckets": [
        (2, dict(BLOCK_M=32, gemm1=dict(BLOCK_N=256, num_warps=4), gemm2=dict(BLOCK_N=256, num_warps=4))),
        (8, dict(BLOCK_M=32, gemm1=dict(BLOCK_N=256, num_warps=4), gemm2=dict(BLOCK_N=256, num_warps=4))),
        (32, dict(BLOCK_M=32, gemm1=dict(BLOCK_N=256, num_warps=4), gemm2=dict(BLOCK_N=256, num_warps=4))),
        (1 << 62, dict(BLOCK_M=32, gemm1=dict(BLOCK_N=256, num_warps=4), gemm2=dict(BLOCK_N=256, num_warps=4))),
    ],
}


@triton.jit
def _k_kernel(x_ptr, BLOCK_M: tl.constexpr):
    pass


def k(x):
    _k_kernel[(1,)](x, BLOCK_M=16)
'''
CONTRACT = OperatorContract(name="k", signature="k(x)", description="", arg_names=("x",), tolerances={}, shapes=())
LEAVES = ("BLOCK_M", ("gemm1", "BLOCK_N"), ("gemm1", "num_warps"), ("gemm2", "BLOCK_N"), ("gemm2", "num_warps"))


def _reads(bucket):
    return [["buckets", bucket, 1] + ([leaf] if isinstance(leaf, str) else list(leaf)) for leaf in LEAVES]


def _result(buckets=(0, 1, 2)):
    """Shapes that read buckets 0-2 (bucket 3 is never reached), each with weight 0.2-0.4."""
    rows = [{"id": f"s{b}", "dims": {}, "weight": 0.2 + 0.1 * b, "bound": "memory", "holdout": False, "error": None,
             "launches": {"kernels": [], "configs_read": _reads(b), "note": ""}} for b in buckets]
    return {"shapes": rows}


def _ctx(source=FLAT, score=0.1):
    return ProposalContext(contract=CONTRACT, incumbent_source=source, incumbent_score=score, feedback="",
                           incumbent_result=_result(), seed=0)


def _leaf_values(source):
    """(bucket, leaf path) -> value of every tunable leaf."""
    out = {}
    for b, (_, bucket) in enumerate(read_configs(source).value["buckets"]):
        for leaf in LEAVES:
            path = (leaf,) if isinstance(leaf, str) else leaf
            v = bucket
            for p in path:
                v = v[p]
            out[(b, path)] = v
    return out


def _changed(a, b):
    va, vb = _leaf_values(a), _leaf_values(b)
    return {k for k in va if va[k] != vb[k]}


def test_the_first_move_changes_a_leaf_in_every_bucket_the_shapes_use_and_none_elsewhere():
    p = SearchProposer(seed=0).propose(_ctx())
    changed = _changed(FLAT, p.source)
    assert len(changed) >= 3, p.changed
    assert {b for b, _ in changed} == {0, 1, 2}           # bucket 3 serves no scored shape: left alone
    assert "tied in" in p.changed


def test_single_slots_are_still_proposed_after_their_groups():
    proposer = SearchProposer(seed=0)
    sizes = []
    for _ in range(80):
        p = proposer.propose(_ctx())
        if p.source is None:
            break
        sizes.append(len(_changed(FLAT, p.source)))
        proposer.observe(p, EvalResult(op="k", verdict="rejected", failed_stage="correctness"), False)
    assert sizes[0] > 1 and 1 in sizes
    assert sizes.index(1) > 0


def test_an_improving_direction_is_followed_at_twice_the_stride():
    proposer = SearchProposer(seed=0)
    p = proposer.propose(_ctx())
    proposer.observe(p, EvalResult(op="k", verdict="accepted", weighted_attainment=0.3), True)
    nxt = proposer.propose(_ctx(source=p.source, score=0.3))
    before, after = _leaf_values(p.source), _leaf_values(nxt.source)
    moved = _changed(p.source, nxt.source)
    assert moved == _changed(FLAT, p.source)               # the same group again
    for key in moved:
        old, new, start = before[key], after[key], _leaf_values(FLAT)[key]
        # the same direction, two grid steps of a power-of-two grid (x4 or /4), where the first was one (x2 or /2)
        assert (old > start and new == old * 4) or (old < start and new == old // 4), (key, start, old, new)
    assert "2 grid steps" in nxt.why


def test_a_failed_stride_falls_back_to_the_step_that_worked():
    proposer = SearchProposer(seed=0)
    p = proposer.propose(_ctx())
    proposer.observe(p, EvalResult(op="k", verdict="accepted", weighted_attainment=0.3), True)
    ctx = _ctx(source=p.source, score=0.3)
    stride = proposer.propose(ctx)
    proposer.observe(stride, EvalResult(op="k", verdict="accepted", weighted_attainment=0.2), False)
    again = proposer.propose(ctx)
    assert _changed(p.source, again.source) == _changed(p.source, stride.source)
    assert "grid steps" not in again.why                  # one step this time
