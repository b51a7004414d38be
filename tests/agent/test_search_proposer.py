"""The offline search proposer and its CONFIGS space: rewrites, pruning, tabu, determinism, prefetch."""
import ast
import importlib.util
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from agent.proposers import make_proposer
from agent.proposers.search import SearchProposer, read_profile
from agent.proposers.search_prefetch import CompileCheck, sandbox_compile_check
from agent.proposers.search_space import (SearchSpaceError, apply_config, config_key, enumerate_space, get_at,
                                          random_configs, read_configs, space_size)
from agent.types import OperatorContract, ProposalContext
from benchmarks.registry import OPERATORS_DIR, list_operators
from sandbox.verdict import EvalResult

SMALL = '''"""A matmul-like test kernel (never run: the search only reads and rewrites it)."""
import triton
import triton.language as tl

# Tuned by hand on an H200.
CONFIGS = {
    "BLOCK_M": 64,      # rows per tile
    "BLOCK_K": 32,
    "GROUP_M": 8,
    "num_warps": 4,
    "num_stages": 3,
}


@triton.jit
def _mm_kernel(a_ptr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pass


def mm(a, b):
    _mm_kernel[(1,)](a, BLOCK_M=CONFIGS["BLOCK_M"], BLOCK_K=CONFIGS["BLOCK_K"])
'''
TINY = SMALL.replace('''    "BLOCK_M": 64,      # rows per tile
    "BLOCK_K": 32,
    "GROUP_M": 8,
''', "")

CONTRACT = OperatorContract(name="mm", signature="mm(a, b)", description="", arg_names=("a", "b"), tolerances={},
                            shapes=({"id": "s", "dims": {"M": 64}, "dtype": "bf16", "weight": 1.0},))


def _result(bound=None, error=None, **extra):
    row = {"id": "s", "dims": {"M": 64}, "weight": 1.0, "bound": bound, "error": error, "holdout": False}
    return {"shapes": [row], **extra}


def _ctx(source=SMALL, score=0.5, result=None, seed=0):
    return ProposalContext(contract=CONTRACT, incumbent_source=source, incumbent_score=score, feedback="",
                           incumbent_result=result, seed=seed)


def _changed(config, base):
    """Names of the slots a config changes relative to base."""
    return {k for k in base if config.get(k) != base[k]}


def _rejected():
    return EvalResult(op="mm", verdict="rejected", failed_stage="correctness")


def _run(proposer, ctx, n, observe=_rejected):
    out = []
    for _ in range(n):
        p = proposer.propose(ctx)
        out.append(p)
        if p.source is None:
            break
        proposer.observe(p, observe(), False)
    return out


# ---- the space ----------------------------------------------------------------------------------

SEEDS = [op for op in list_operators() if (OPERATORS_DIR / op / "seed.py").is_file()]


@pytest.mark.parametrize("op", SEEDS)
def test_seed_rewrites_stay_valid_candidates_and_touch_only_the_literal(op):
    src = (OPERATORS_DIR / op / "seed.py").read_text()
    lit = read_configs(src)
    a, b = lit.span
    raw = src.encode()
    configs = random_configs(src, 4, seed=7)
    assert len(configs) == 4
    for config in configs:
        out = apply_config(src, config)
        assert config_key(read_configs(out).value) == config_key(config)
        tree = ast.parse(out)
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert op in names
        assert any(ast.unparse(d).startswith("triton.jit") for n in tree.body if isinstance(n, ast.FunctionDef)
                   for d in n.decorator_list)
        new = out.encode()
        assert new[:a] == raw[:a] and new[len(new) - (len(raw) - b):] == raw[b:]
        # comments inside the literal survive the in-place rewrite
        literal_comments = re.findall(r"#[^\n]*", raw[a:b].decode())
        assert re.findall(r"#[^\n]*", new[a:len(new) - (len(raw) - b)].decode()) == literal_comments


def test_apply_config_changes_only_the_numbers():
    out = apply_config(SMALL, {"BLOCK_M": 128, "num_stages": 4})
    assert out == SMALL.replace('"BLOCK_M": 64,', '"BLOCK_M": 128,').replace('"num_stages": 3,', '"num_stages": 4,')


def test_apply_config_round_trips_every_point_of_a_small_grid():
    for config in enumerate_space(TINY):
        assert read_configs(apply_config(TINY, config)).value == config


def test_a_structural_change_rewrites_the_whole_literal_and_keeps_the_rest():
    out = apply_config(SMALL, {"NEW_KNOB": 2})
    value = read_configs(out).value
    assert value["NEW_KNOB"] == 2 and value["BLOCK_M"] == 64
    assert out.split("CONFIGS = ")[0] == SMALL.split("CONFIGS = ")[0]
    assert out.split("\n\n\n@triton.jit")[1] == SMALL.split("\n\n\n@triton.jit")[1]


def test_enumerate_space_is_the_product_of_the_grids():
    # BLOCK_M, BLOCK_K: 16..256 (5 each); GROUP_M: 1..16 (5); num_warps: 1..16 (5); num_stages: 1..6 (6)
    assert space_size(SMALL) == 5 * 5 * 5 * 5 * 6
    points = enumerate_space(SMALL)
    assert len(points) == 3750 and len({config_key(p) for p in points}) == 3750
    assert read_configs(SMALL).value in points
    assert all(16 <= p["BLOCK_M"] <= 256 and p["num_warps"] in (1, 2, 4, 8, 16) and 1 <= p["num_stages"] <= 6
               for p in points)
    with pytest.raises(SearchSpaceError, match="3750 points, over the limit 100"):
        enumerate_space(SMALL, limit=100)


def test_enumerate_one_bucket_of_the_gemm_seed():
    if "gemm" not in SEEDS:
        pytest.skip("no gemm seed")
    src = (OPERATORS_DIR / "gemm" / "seed.py").read_text()
    bucket = read_configs(src).value["buckets"][2][1]
    assert set(bucket) >= {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"}
    size = space_size(src, within=("buckets", 2))
    # tiles, GROUP_M, warps (5 values each), stages (6), and the structural switches SEARCH_SPACE declares:
    # TMA, PERSISTENT, WARP_SPECIALIZE, FLATTEN, STREAM_K (2 each) and SPLIT_K (4)
    assert size == 5 * 5 * 5 * 5 * 5 * 6 * (2 * 2 * 2 * 2 * 2 * 4)
    sample = random_configs(src, 20, seed=1, within=("buckets", 2))
    assert all(c["buckets"][0] == read_configs(src).value["buckets"][0] for c in sample)
    assert len({config_key(c) for c in sample}) == 20
    with pytest.raises(SearchSpaceError, match="no tunable under"):
        space_size(src, within=("nope",))


def test_configs_that_cannot_be_rewritten_are_explained():
    with pytest.raises(SearchSpaceError, match="no module-level CONFIGS"):
        read_configs("def f():\n    pass\n")
    with pytest.raises(SearchSpaceError, match="not a literal"):
        read_configs("import os\nCONFIGS = {'BLOCK': os.cpu_count()}\n")
    with pytest.raises(SearchSpaceError, match="assigned 2 times"):
        read_configs("CONFIGS = {}\nCONFIGS = {}\n")


def test_search_space_declaration_overrides_a_grid():
    src = SMALL.replace("# Tuned by hand", 'SEARCH_SPACE = {"BLOCK_M": [32, 64, 96]}\n# Tuned by hand')
    assert {p["BLOCK_M"] for p in enumerate_space(src)} == {32, 64, 96}


# ---- pruning by the profile ---------------------------------------------------------------------

WARP_SPECIALIZED = SMALL.replace('    "num_stages": 3,\n', '    "num_stages": 3,\n    "NUM_CONSUMER_GROUPS": 1,\n')


def test_memory_bound_kernels_get_no_compute_side_moves():
    base = read_configs(WARP_SPECIALIZED).value
    assert "NUM_CONSUMER_GROUPS" in base
    proposals = _run(SearchProposer(seed=1), _ctx(source=WARP_SPECIALIZED, result=_result("memory")), 40)
    assert len(proposals) == 40
    touched = set().union(*(_changed(p.meta["config"], base) for p in proposals))
    # stages and BLOCK_K set the bytes in flight, which a memory-bound loop needs; consumer groups only feed MMAs
    assert touched == {"BLOCK_M", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"}
    assert any(p.meta["move"] == "restart" for p in proposals)      # restarts obey the pruning too


def test_compute_bound_kernels_get_no_memory_side_moves():
    base = read_configs(WARP_SPECIALIZED).value
    proposals = _run(SearchProposer(seed=1), _ctx(source=WARP_SPECIALIZED, result=_result("compute")), 30)
    touched = set().union(*(_changed(p.meta["config"], base) for p in proposals))
    assert "GROUP_M" not in touched and {"BLOCK_K", "num_stages", "NUM_CONSUMER_GROUPS"} <= touched


def test_decisive_counters_override_the_roofline_regime():
    counters = {"available": True, "shapes": [{"dims": {"M": 64}, "kernels": [
        {"kernel": "_mm_kernel", "duration_us": 5.0, "dram_pct": 88.0, "sm_pct": 20.0}]}]}
    assert read_profile(_result("compute", counters=counters)).regime == "memory"
    assert read_profile(_result("compute")).regime == "compute"
    assert read_profile(None).regime == "unknown"


def test_a_failing_shape_gets_only_resource_reducing_moves():
    base = read_configs(SMALL).value
    proposals = _run(SearchProposer(seed=3), _ctx(result=_result("compute", error="out of resources: shared memory")), 30)
    neighbours = [p for p in proposals if p.meta["move"] == "neighbour"]
    assert neighbours
    for p in neighbours:
        [name] = _changed(p.meta["config"], base)
        assert name in ("BLOCK_M", "BLOCK_K", "num_stages") and p.meta["config"][name] < base[name]


def test_spills_in_the_compile_report_also_shrink():
    info = {"kernels": [{"name": "_mm_kernel", "registers": 255, "spills_bytes": 512}]}
    assert read_profile(_result("memory", compile_info=info)).reduce


# ---- tabu, restarts, determinism ----------------------------------------------------------------

def test_tabu_never_repeats_and_the_search_ends_when_the_space_is_spent():
    # num_warps: 5 values x num_stages: 6 values = 30 points, the incumbent among them.
    proposals = _run(SearchProposer(seed=5), _ctx(source=TINY), 40)
    sources = [p.source for p in proposals if p.source is not None]
    assert len(sources) == 29 and len(set(sources)) == 29
    assert TINY not in sources
    assert proposals[-1].source is None and proposals[-1].meta["final"] is True
    assert "search exhausted" in proposals[-1].error


def test_the_same_seed_gives_the_same_sequence():
    def sequence(seed):
        return [p.source for p in _run(SearchProposer(seed=seed), _ctx(), 25)]

    assert sequence(11) == sequence(11)
    assert sequence(11) != sequence(12)


def test_the_seed_defaults_to_the_context_seed():
    a = [p.source for p in _run(SearchProposer(), _ctx(seed=4), 12)]
    b = [p.source for p in _run(SearchProposer(seed=4), _ctx(seed=99), 12)]
    assert a == b


def _objective(config):
    """A made-up landscape: best at BLOCK_M=256, num_warps=8, the rest indifferent."""
    return 1.0 - abs(config["BLOCK_M"].bit_length() - 9) * 0.1 - abs(config["num_warps"].bit_length() - 4) * 0.05


def test_hill_climb_follows_improvements_like_the_loop_would():
    proposer = SearchProposer(seed=2)
    source, score = SMALL, _objective(read_configs(SMALL).value)
    for _ in range(60):
        p = proposer.propose(_ctx(source=source, score=score, result=_result("memory")))
        if p.source is None:
            break
        s = _objective(p.meta["config"])
        proposer.observe(p, EvalResult(op="mm", verdict="accepted", weighted_attainment=s), s > score)
        if s > score:
            source, score = p.source, s
    best = read_configs(source).value
    assert (best["BLOCK_M"], best["num_warps"]) == (256, 8)


@pytest.mark.parametrize("seed", range(6))
def test_momentum_repeats_an_improving_step(seed):
    proposer = SearchProposer(seed=seed)
    ctx = _ctx(result=_result("memory"))
    for _ in range(20):
        p = proposer.propose(ctx)
        if p.meta["config"]["BLOCK_M"] == 128:
            break
        proposer.observe(p, _rejected(), False)
    assert p.meta["config"]["BLOCK_M"] == 128
    proposer.observe(p, EvalResult(op="mm", verdict="accepted", weighted_attainment=0.9), True)
    nxt = proposer.propose(_ctx(source=p.source, score=0.9, result=_result("memory")))
    assert nxt.meta["config"]["BLOCK_M"] == 256 and _changed(nxt.meta["config"], p.meta["config"]) == {"BLOCK_M"}


def test_alternatives_come_after_the_neighbourhood():
    alt = TINY.replace("def mm(a, b):", "def mm(a, b):  # ALTERNATIVE")
    not_a_candidate = TINY.replace("def mm(a, b):", "def matmul(a, b):")
    proposals = _run(SearchProposer(seed=0, alternatives=[not_a_candidate, alt, TINY]), _ctx(source=TINY), 40)
    kinds = [p.meta.get("move") for p in proposals if p.source is not None]
    i = kinds.index("alternative")
    assert kinds[:i] and set(kinds[:i]) == {"neighbour"}
    assert proposals[i].source == alt
    assert kinds.count("alternative") == 1               # the incumbent itself is never offered


def test_an_incumbent_without_configs_still_gets_alternatives_then_stops():
    plain = TINY.replace("CONFIGS = {", "SETTINGS = {")
    proposals = _run(SearchProposer(alternatives=[TINY]), _ctx(source=plain), 5)
    assert proposals[0].source == TINY
    assert proposals[1].source is None and "CONFIGS" in proposals[1].error and proposals[1].meta["final"]


def test_the_table_builds_the_search_proposer():
    p = make_proposer("search", cfg=None, seed=1)
    assert isinstance(p, SearchProposer) and p.name == "search"


# ---- prefetch: real compiles for Hopper in a process pool ---------------------------------------

PREFETCH_KERNEL = '''import triton
import triton.language as tl

SEARCH_SPACE = {"BLOCK": [96, 512, 2048], "num_warps": [1, 2]}
CONFIGS = {"BLOCK": 512, "num_warps": 1, "maxnreg": 32}


@triton.jit
def _sq_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    s = tl.sum(x * x, axis=0)
    tl.store(y_ptr + offs, x * s, mask=offs < n)


def sq(x):
    return x
'''


def compile_small_kernel(source: str, op: str) -> CompileCheck:
    """A real triton.compile for sm_90 of the one test kernel; spills read from the cubin with cuobjdump.
    Runs in the search's spawned pool workers (TRITON_INTERPRET removed there)."""
    import triton
    from triton.backends.compiler import GPUTarget

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "candidate_sq.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("candidate_sq", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cfg = module.CONFIGS
        src = triton.compiler.ASTSource(fn=module._sq_kernel, constexprs={"BLOCK": cfg["BLOCK"]},
                                        signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"})
        try:
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": cfg["num_warps"], "maxnreg": cfg["maxnreg"]})
        except Exception as exc:
            return CompileCheck(False, error=str(exc).strip().splitlines()[-1])
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        usage = subprocess.run([str(tool), "--dump-resource-usage", str(cubin)], capture_output=True, text=True).stdout
        stack = int(re.search(r"STACK:(\d+)", usage).group(1))
        return CompileCheck(True, spill_bytes=stack)


@pytest.mark.slow
def test_prefetch_compiles_in_a_pool_and_drops_what_fails_or_spills():
    proposer = SearchProposer(seed=0, compile_fn=compile_small_kernel, max_workers=2, max_spill_bytes=128)
    ctx = ProposalContext(contract=OperatorContract("sq", "sq(x)", "", ("x",), {}, ()),
                          incumbent_source=PREFETCH_KERNEL, incumbent_score=None, feedback="")
    try:
        first = proposer.propose(ctx)                 # not prefetched: handed out unchecked
        proposer.observe(first, _rejected(), False)
        assert proposer.prefetch(5) == 4              # the rest of the 3 x 2 grid, minus incumbent and `first`
        handed = []
        while True:
            p = proposer.propose(ctx)
            if p.source is None:
                break
            handed.append(read_configs(p.source).value)
            proposer.observe(p, _rejected(), False)
    finally:
        proposer.close()
    reasons = dict(proposer.dropped)
    # BLOCK=96: tl.arange needs a power of two; BLOCK=2048 with 1 warp and 32 registers spills ~300 bytes.
    assert any("does not compile" in r and "power of 2" in r for r in reasons.values()), reasons
    assert any("spills" in r for r in reasons.values()), reasons
    for config in handed:
        assert config["BLOCK"] != 96 and not (config["BLOCK"] == 2048 and config["num_warps"] == 1)
    assert len(handed) + len(proposer.dropped) == 4


@pytest.mark.slow
@pytest.mark.interpreter
def test_the_default_compile_check_uses_the_sandbox_gates():
    if "rms_norm" not in SEEDS:
        pytest.skip("no rms_norm seed")
    src = (OPERATORS_DIR / "rms_norm" / "seed.py").read_text()
    lit = read_configs(src)
    assert sandbox_compile_check(src, "rms_norm").ok
    bucket = min(lit.value["decode_by_block_h"])           # the bucket the tiny compile-gate shape uses
    broken = apply_config(src, {"decode_by_block_h": {bucket: {"ROWS": 3}}})
    check = sandbox_compile_check(broken, "rms_norm")
    assert get_at(read_configs(broken).value, ("decode_by_block_h", bucket, "ROWS")) == 3
    assert not check.ok and "power of 2" in check.error
