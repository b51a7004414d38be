"""The search's compile check before the GPU: a move whose kernel needs more shared memory than Hopper has is
dropped on CPU cores, in the bucket it changes, whether it was prefetched or not; a move that fits is kept."""
import importlib.util
import tempfile
from pathlib import Path

import pytest

from agent.proposers.search import SearchProposer
from agent.proposers.search_prefetch import (MAX_SHARED_BYTES, CompileCheck, bucket_probes, read_compile_report,
                                             sandbox_compile_check)
from agent.proposers.search_space import apply_config, read_configs, set_at
from agent.types import OperatorContract, ProposalContext
from benchmarks.registry import OPERATORS_DIR
from sandbox.verdict import EvalResult

# A pipelined matmul tile: (64 x 128 + 128 x BLOCK_N) bf16 per stage, so BLOCK_N = 128 needs 49152 bytes a stage:
# 4 stages fit in Hopper's 232448, 5 do not (245760). Size buckets as the gemm and fused_moe seeds write them.
BUCKETED = '''import triton
import triton.language as tl

SEARCH_SPACE = {"BLOCK_N": [64, 128], "num_warps": [4]}
CONFIGS = {
    "buckets": [
        (16, dict(BLOCK_N=64, num_warps=4, num_stages=4)),
        (1 << 62, dict(BLOCK_N=128, num_warps=4, num_stages=4)),
    ],
}


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * BLOCK_N + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * BLOCK_N
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], acc)


def pick(m):
    return next(cfg for bound, cfg in CONFIGS["buckets"] if m <= bound)


def mm(a, b):
    cfg = pick(a.shape[0])
    c = a.new_empty((64, cfg["BLOCK_N"]))
    _mm_kernel[(1,)](a, b, c, a.shape[1], BLOCK_M=64, BLOCK_N=cfg["BLOCK_N"], BLOCK_K=128,
                     num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return c
'''
TINY_M = 8      # the compile gate runs a tiny shape: it reads the first bucket only


def compile_at_a_tiny_shape(source: str, op: str) -> CompileCheck:
    """The sandbox's compile gate in small, in the search's spawned pool workers: the launcher's choice at a
    tiny M, compiled for sm_90 with a real triton.compile; shared memory from the compiled metadata."""
    import triton
    from triton.backends.compiler import GPUTarget

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "candidate_mm.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("candidate_mm", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            cfg = module.pick(TINY_M)
        except Exception as exc:        # the launcher failed before any kernel was compiled
            return CompileCheck(False, error=f"the tiny run raised {type(exc).__name__}: {exc}")
        src = triton.compiler.ASTSource(
            fn=module._mm_kernel, constexprs={"BLOCK_M": 64, "BLOCK_N": cfg["BLOCK_N"], "BLOCK_K": 128},
            signature={"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "K": "i32", "BLOCK_M": "constexpr",
                       "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"},
            attrs={(i,): [["tt.divisibility", 16]] for i in range(4)})    # 16-byte aligned, as the gate records
        try:
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        except Exception as exc:
            return CompileCheck(False, error=str(exc).strip().splitlines()[-1], compiled=True)
        return CompileCheck(True, shared_bytes=int(k.metadata.shared), shared_kernel="_mm_kernel", compiled=True)


CONTRACT = OperatorContract(name="mm", signature="mm(a, b)", description="", arg_names=("a", "b"), tolerances={},
                            shapes=({"id": "s", "dims": {"M": 4096}, "dtype": "bf16", "weight": 1.0},))


def _result(timing_mode="graph", low_occupancy=False):
    """The incumbent's result: one scored shape that reads bucket 1 only (so only bucket 1 moves)."""
    reads = [["buckets", 1, 1, key] for key in ("BLOCK_N", "num_warps", "num_stages")]
    row = {"id": "s", "dims": {"M": 4096}, "weight": 1.0, "bound": None, "holdout": False, "error": None,
           "timing_mode": timing_mode, "launches": {"kernels": [], "configs_read": reads, "note": ""}}
    out = {"shapes": [row], "interpreter": timing_mode == "interpreter"}
    if low_occupancy:     # shrinking moves first: num_stages 4 -> 3 is the first move
        out["counters"] = {"available": True, "shapes": [{"kernels": [{"achieved_occupancy_pct": 10.0}]}]}
    return out


def _ctx(source, result):
    return ProposalContext(contract=CONTRACT, incumbent_source=source, incumbent_score=0.5, feedback="",
                           incumbent_result=result, seed=0)


def _bucket(p):
    cfg = read_configs(p.source).value["buckets"][1][1]
    return cfg["BLOCK_N"], cfg["num_stages"]


def _shared(block_n, stages):
    return (64 * 128 + 128 * block_n) * 2 * stages


def _propose(proposer, ctx, n):
    out = []
    for _ in range(n):
        p = proposer.propose(ctx)
        if p.source is None:
            break
        out.append(p)
        proposer.observe(p, EvalResult(op="mm", verdict="rejected", failed_stage="timing"), False)
    return out


def test_a_move_taken_without_prefetch_that_needs_too_much_shared_memory_is_dropped():
    # the incumbent was timed on a GPU: a move the loop did not prefetch is checked before it is handed out
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2)
    try:
        handed = _propose(proposer, _ctx(BUCKETED, _result("graph")), 3)
    finally:
        proposer.close()
    reasons = dict(proposer.dropped)
    why = reasons.get("num_stages in CONFIGS['buckets'][1][1]: 4 -> 5", "")
    assert "_mm_kernel" in why and f"{_shared(128, 5)} bytes" in why and f"allows {MAX_SHARED_BYTES}" in why, reasons
    assert "CONFIGS['buckets'][1][1]" in why and MAX_SHARED_BYTES == 232448
    assert handed and all(_shared(*_bucket(p)) <= MAX_SHARED_BYTES for p in handed), [_bucket(p) for p in handed]
    assert {(64, 4), (128, 3)} <= {_bucket(p) for p in handed}      # the neighbours that fit were kept


def test_a_prefetched_move_that_needs_too_much_shared_memory_is_dropped():
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2, precheck=False)
    ctx = _ctx(BUCKETED, _result("graph", low_occupancy=True))
    try:
        first = _propose(proposer, ctx, 1)[0]                   # not prefetched and, here, not checked
        assert _bucket(first) == (128, 3)
        assert proposer.prefetch(2) == 2                        # the other two neighbours: BLOCK_N 64, 5 stages
        handed = _propose(proposer, ctx, 2)
    finally:
        proposer.close()
    assert [c for c, _ in proposer.dropped] == ["num_stages in CONFIGS['buckets'][1][1]: 4 -> 5"]
    assert f"needs {_shared(128, 5)} bytes of shared memory" in proposer.dropped[0][1]
    assert (64, 4) in {_bucket(p) for p in handed} and (128, 5) not in {_bucket(p) for p in handed}


def test_a_move_that_fits_is_kept():
    fits = apply_config(BUCKETED, set_at(read_configs(BUCKETED).value, ("buckets", 1, 1, "BLOCK_N"), 64))
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2)
    try:
        handed = _propose(proposer, _ctx(fits, _result("graph")), 3)
    finally:
        proposer.close()
    # 5 stages of the narrow tile: 163840 bytes; the wide tile at 4 stages: 196608; both under 232448
    assert proposer.dropped == []
    assert {(64, 5), (64, 3), (128, 4)} == {_bucket(p) for p in handed}
    assert all("precheck" not in p.meta for p in handed)       # every probe compiled: nothing left unjudged


def test_a_probe_that_compiles_nothing_leaves_the_move_to_the_gpu_with_a_note():
    # a launcher that cannot run the wide tile at a tiny M: the probe of bucket 1 says nothing about shared memory
    strict = BUCKETED.replace('''def pick(m):
''', '''def pick(m):
    if m < 16 and CONFIGS["buckets"][0][1]["BLOCK_N"] > 64:
        raise ValueError("a tiny M takes the narrow tile")
''')
    proposer = SearchProposer(seed=0, compile_fn=compile_at_a_tiny_shape, max_workers=2)
    try:
        handed = _propose(proposer, _ctx(strict, _result("graph")), 3)
    finally:
        proposer.close()
    over = [p for p in handed if _bucket(p) == (128, 5)]
    assert proposer.dropped == [] and over, [_bucket(p) for p in handed]
    assert "CONFIGS['buckets'][1][1] not compiled before the GPU" in over[0].meta["precheck"]
    assert "ValueError" in over[0].meta["precheck"]


def test_probes_copy_a_changed_size_bucket_into_its_siblings_and_nothing_else():
    base = {"max_block": 8192,
            "by_block": {256: {"ROWS": 8, "num_warps": 4}, 1024: {"ROWS": 2, "num_warps": 4}},
            "buckets": [(16, dict(BLOCK_M=16, gemm1=dict(BLOCK_N=64))),
                        (1 << 62, dict(BLOCK_M=64, gemm1=dict(BLOCK_N=128)))],
            "gemms": [dict(BLOCK_N=64, num_stages=3), dict(BLOCK_N=256, num_stages=3)]}
    moved = set_at(base, ("buckets", 1, 1, "gemm1", "BLOCK_N"), 256)
    (probe,) = bucket_probes(base, moved)
    assert probe.where == "CONFIGS['buckets'][1][1]" and probe.changed == (("buckets", 1, 1, "gemm1", "BLOCK_N"),)
    assert probe.config["buckets"] == [(16, moved["buckets"][1][1]), (1 << 62, moved["buckets"][1][1])]  # bounds stay
    assert {k: v for k, v in probe.config.items() if k != "buckets"} == \
        {k: v for k, v in base.items() if k != "buckets"}
    (rows,) = bucket_probes(base, set_at(base, ("by_block", 1024, "ROWS"), 4))
    assert rows.config["by_block"] == {256: {"ROWS": 4, "num_warps": 4}, 1024: {"ROWS": 4, "num_warps": 4}}
    # per-kernel configs are not buckets, and a top-level leaf is read by the tiny run itself: no probe
    assert bucket_probes(base, set_at(base, ("gemms", 0, "num_stages"), 4)) == []
    assert bucket_probes(base, set_at(base, ("max_block",), 4096)) == []


def test_the_sandbox_report_gives_the_kernel_that_needs_the_most_shared_memory():
    # compile_info of the sandbox's gate on a fused_moe probe (GEMM 1's BLOCK_K 256 in the "up to 24" bucket)
    info = {"kernels": [{"name": "_fused_moe_gemm1_kernel", "spills_bytes": 8, "shared_bytes": 246784,
                         "error": "kernel _fused_moe_gemm1_kernel: needs 246784 bytes of shared memory per block"},
                        {"name": "_fused_moe_gemm2_kernel", "spills_bytes": 0, "shared_bytes": 41984, "error": None}]}
    check = read_compile_report(False, ["compile gate: kernel _fused_moe_gemm1_kernel: needs 246784 bytes"], info)
    assert check.refutes(256) and not check.viable(256)
    assert check.reason(256).startswith("kernel _fused_moe_gemm1_kernel needs 246784 bytes of shared memory")
    assert "232448" in check.reason(256)
    # launches recorded in fp32 (the interpreter's bf16 run raised): twice the GPU's bytes, not judged
    fp32 = read_compile_report(True, [], {**info, "note": "the bf16 run raised ...; launches recorded in fp32"})
    assert fp32.shared_bytes == 0 and not fp32.refutes(256) and "not judged" in fp32.note
    assert not read_compile_report(False, ["lint: ..."], {}).compiled      # nothing compiled: a probe says nothing


@pytest.mark.slow
@pytest.mark.interpreter
def test_the_sandbox_gate_sees_the_moved_bucket_only_through_its_probe():
    """fused_moe's tiny compile-gate shape reads the "up to 12" bucket; a move in the "up to 24" bucket (the one
    T256-E128 reads) passed the old check and failed on the H100 with OutOfResources."""
    src = (OPERATORS_DIR / "fused_moe" / "seed.py").read_text()
    base = read_configs(src).value
    assert base["buckets"][3][0] == 24 and base["buckets"][3][1]["gemm1"]["BLOCK_K"] == 128
    moved = set_at(base, ("buckets", 3, 1, "gemm1", "BLOCK_K"), 256)
    (probe,) = bucket_probes(base, moved)
    assert sandbox_compile_check(apply_config(src, moved), "fused_moe").viable(256)     # the move alone: passes
    check = sandbox_compile_check(apply_config(src, probe.config), "fused_moe")
    assert check.refutes(256) and check.shared_kernel == "_fused_moe_gemm1_kernel", check
    assert check.shared_bytes > MAX_SHARED_BYTES
