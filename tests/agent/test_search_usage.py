"""The search moves what the scored shapes use (launch record), per bucket, switches included."""
from agent.proposers.search import SearchProposer
from agent.proposers.search_space import apply_config, read_configs
from agent.proposers.search_usage import read_usage
from agent.types import OperatorContract, ProposalContext
from sandbox.verdict import EvalResult

BUCKETED = '''import triton
import triton.language as tl

CONFIGS = {
    "max_block": 8192,
    "by_block": {
        256: {"ROWS": 8, "num_warps": 4, "GRID_2D": 0},
        1024: {"ROWS": 2, "num_warps": 4, "GRID_2D": 0},
        8192: {"ROWS": 1, "num_warps": 16, "PERSISTENT": False, "EVICT": "evict_first"},
    },
}
SEARCH_SPACE = {"EVICT": ["", "evict_first", "evict_last"]}


@triton.jit
def _k_kernel(x_ptr, ROWS: tl.constexpr):
    pass


def k(x):
    _k_kernel[(1,)](x, ROWS=1)
'''
CONTRACT = OperatorContract(name="k", signature="k(x)", description="", arg_names=("x",), tolerances={},
                            shapes=())


def _row(sid, weight, bound, reads):
    return {"id": sid, "dims": {}, "weight": weight, "bound": bound, "holdout": False, "error": None,
            "launches": {"kernels": [], "configs_read": reads, "note": ""}}


DECODE = [["by_block", 1024, "ROWS"], ["by_block", 1024, "num_warps"], ["by_block", 1024, "GRID_2D"], ["max_block"]]
PREFILL = [["by_block", 8192, "ROWS"], ["by_block", 8192, "num_warps"], ["by_block", 8192, "PERSISTENT"],
           ["by_block", 8192, "EVICT"], ["max_block"]]


def _result(rows):
    return {"shapes": rows + [{"id": "holdout-1", "holdout": True, "weight": 1.0, "launches": None}]}


def _ctx(result, seed=0):
    return ProposalContext(contract=CONTRACT, incumbent_source=BUCKETED, incumbent_score=0.5, feedback="",
                           incumbent_result=result, seed=seed)


def _moved_paths(p):
    base, new = read_configs(BUCKETED).value, read_configs(p.source).value
    return {(k, key) for k, bucket in new["by_block"].items() for key in bucket if bucket[key] != base["by_block"][k][key]}


def test_usage_sums_weights_and_bounds_per_path_and_is_unknown_without_a_full_record():
    u = read_usage(_result([_row("d", 0.4, "memory", DECODE), _row("p", 0.6, "compute", PREFILL)]))
    assert u.known and u.weight_of(("max_block",)) == 1.0 and u.weight_of(("by_block", 8192, "ROWS")) == 0.6
    assert u.regime(("by_block", 1024, "ROWS")) == "memory" and u.regime(("by_block", 8192, "ROWS")) == "compute"
    assert u.regime(("max_block",)) == "mixed" and not u.uses(("by_block", 256, "ROWS"))
    assert "used by p" in u.describe(("by_block", 8192, "ROWS"))
    missing = _row("p", 0.75, "compute", None)
    assert not read_usage(_result([_row("d", 0.25, "memory", DECODE), missing])).known
    assert read_usage(None).uses(("anything",))


def test_only_buckets_a_scored_shape_reads_are_moved_and_switches_are_flipped():
    result = _result([_row("d", 0.25, "memory", DECODE), _row("p", 0.75, "memory", PREFILL)])
    prop = SearchProposer(seed=1)
    moved = set()
    for _ in range(40):
        p = prop.propose(_ctx(result))
        if p.source is None:
            break
        paths = _moved_paths(p)
        assert all(k != 256 for k, _ in paths), p.changed        # no scored shape reads bucket 256
        moved |= paths
        prop.observe(p, EvalResult(op="k", verdict="rejected", failed_stage="correctness"), False)
    assert {(1024, "GRID_2D"), (8192, "PERSISTENT"), (8192, "EVICT"), (1024, "ROWS"), (8192, "ROWS")} <= moved
    switched = read_configs(apply_config(BUCKETED, {"by_block": {8192: {"PERSISTENT": True, "EVICT": ""}}})).value
    assert switched["by_block"][8192]["PERSISTENT"] is True and switched["by_block"][8192]["EVICT"] == ""


def test_before_the_model_the_heaviest_shapes_buckets_go_first_and_say_so():
    result = _result([_row("d", 0.05, "memory", DECODE), _row("p", 0.95, "memory", PREFILL)])
    prop = SearchProposer(seed=3)
    first = [prop.propose(_ctx(result)) for _ in range(4)]
    assert all(all(k == 8192 for k, _ in _moved_paths(p)) for p in first), [p.changed for p in first]
    assert "used by p" in first[0].why


def test_each_bucket_is_pruned_by_its_own_shapes_regime():
    # a compute-bound prefill bucket gets no memory-side moves; the memory-bound decode bucket does
    rows = [_row("d", 0.2, "memory", [["by_block", 1024, "BLOCK"]]), _row("p", 0.8, "compute", [["by_block", 8192, "BLOCK"]])]
    src = BUCKETED.replace('"ROWS": 2,', '"ROWS": 2, "BLOCK": 64,').replace('"ROWS": 1,', '"ROWS": 1, "BLOCK": 64,')
    prop = SearchProposer(seed=0)
    ctx = ProposalContext(contract=CONTRACT, incumbent_source=src, incumbent_score=0.5, feedback="",
                          incumbent_result=_result(rows), seed=0)
    changed = []
    for _ in range(10):
        p = prop.propose(ctx)
        if p.source is None:
            break
        changed.append(p.changed)
        prop.observe(p, None, False)
    assert changed and all("1024" in c for c in changed), changed     # BLOCK is a memory-side knob
