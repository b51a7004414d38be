"""`aka bench --require FEATURE` (SandboxSettings.require_features): the feature gate (sandbox/feature_gate.py)
reads the PTX/SASS of the kernels the scored shapes run (compiled for sm_90 offline without a GPU) and rejects
a kernel that lacks a required feature, naming per bucket what it does use. The compute-bound gemm seed passes
--require wgmma; its TMA switch adds tma."""
from pathlib import Path

import pytest

from sandbox_requests import make_request

from benchmarks.registry import load_operator
from benchmarks.spec import Shape
from sandbox import evaluate

GEMM = load_operator("gemm")
SHAPE = next(s for s in GEMM.shapes if s.dim["M"] >= 256)     # a compute-bound hot shape


def _bench(source: str, required: tuple[str, ...]):
    return evaluate(make_request("gemm", source, (SHAPE,), trials=1, holdout=False, timing=False,
                                 require_features=required, seed=7))


@pytest.mark.interpreter
def test_seed_without_tma_is_rejected_with_the_features_it_uses():
    res = _bench(Path(GEMM.seed_path).read_text(), ("wgmma", "tma"))
    assert res.failed_stage == "compile"
    reason = " ".join(res.reasons)
    assert "required feature tma missing" in reason and "uses cp.async, wgmma" in reason
    assert "wgmma missing" not in reason and res.compile_info["scored_features"]["missing"] == ["tma"]


@pytest.mark.interpreter
def test_the_tma_switch_passes_wgmma_and_tma():
    source = Path(GEMM.seed_path).read_text().replace("TMA=0, PERSISTENT=0", "TMA=1, PERSISTENT=1")
    assert source.count("TMA=1, PERSISTENT=1") == 5
    res = _bench(source, ("wgmma", "tma"))
    assert res.accepted, res.reasons
    assert {"wgmma", "tma"} <= set(res.compile_info["features"])


# A tiny matmul operator whose candidate has two size buckets: up to 32 rows, outer products (no tl.dot, no
# wgmma); above, one tl.dot tile (wgmma on sm_90). The compile gate's one run sees only the first shape.
TINY_MM = '''
import torch
from benchmarks.spec import Tolerance

NAME = "tiny_mm"
SIGNATURE = "tiny_mm(x[M, 32], w[32, 32]) -> [M, 32]"
ARGS = ("x", "w")
DESCRIPTION = "x @ w"
TOLERANCES = {"fp32": Tolerance(1e-4, 1e-4, 1e-4), "bf16": Tolerance(2e-2, 2e-2, 1e-2)}


def make_inputs(dims, dtype, seed, device="cpu"):
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return {"x": torch.randn(int(dims["M"]), 32, generator=g, device=device),
            "w": torch.randn(32, 32, generator=g, device=device)}


def reference(x, w):
    return x @ w


def output_spec(dims, dtype):
    return (int(dims["M"]), 32), "fp32"      # make_inputs draws fp32 whatever the shape's dtype


def work(dims, dtype):
    return {"fp32": 2.0 * dims["M"] * 32 * 32}, 4.0 * (dims["M"] * 64 + 1024)


def interpreter_dims(dims):
    return dict(dims)


def holdout_dims(rng, hot_dims):
    return [{"M": 40}]


def occurrences(model_cfg, tp, tokens):
    return []
'''

BUCKETED = '''
import torch
import triton
import triton.language as tl

CONFIGS = {"buckets": [(32, dict(BLOCK_M=16, USE_DOT=False)), (1 << 30, dict(BLOCK_M=64, USE_DOT=True))]}


@triton.jit
def _tiny_mm_kernel(x_ptr, w_ptr, out_ptr, M, BLOCK_M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                    USE_DOT: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    ks = tl.arange(0, K)
    ns = tl.arange(0, N)
    if USE_DOT:
        x = tl.load(x_ptr + rows[:, None] * K + ks[None, :], mask=rows[:, None] < M, other=0.0)
        acc = tl.dot(x, tl.load(w_ptr + ks[:, None] * N + ns[None, :]))
    else:
        acc = tl.zeros((BLOCK_M, N), dtype=tl.float32)
        for kk in range(K):
            xk = tl.load(x_ptr + rows * K + kk, mask=rows < M, other=0.0)
            acc += xk[:, None] * tl.load(w_ptr + kk * N + ns)[None, :]
    tl.store(out_ptr + rows[:, None] * N + ns[None, :], acc, mask=rows[:, None] < M)


def tiny_mm(x, w):
    M = x.shape[0]
    out = torch.empty((M, 32), dtype=torch.float32, device=x.device)
    cfg = [b for bound, b in CONFIGS["buckets"] if M <= bound][0]
    _tiny_mm_kernel[(triton.cdiv(M, cfg["BLOCK_M"]),)](x, w, out, M, K=32, N=32, num_warps=4, **cfg)
    return out
'''

SMALL = Shape.make("m16", {"M": 16}, dtype="fp32")
LARGE = Shape.make("m64", {"M": 64}, dtype="bf16")     # bf16: the feature gate records it again at its dtype


def _bench_tiny(tmp_path, shapes, required):
    (tmp_path / "tiny_mm").mkdir(exist_ok=True)
    (tmp_path / "tiny_mm" / "operator.py").write_text(TINY_MM)
    return evaluate(make_request("tiny_mm", BUCKETED, shapes, trials=1, holdout=False, timing=False,
                                 require_features=required, seed=3, timeout_s=120.0), operator_dir=str(tmp_path))


@pytest.mark.interpreter
def test_a_large_bucket_with_wgmma_passes_when_a_scored_shape_runs_it(tmp_path):
    res = _bench_tiny(tmp_path, (SMALL, LARGE), ("wgmma",))     # the compile gate's run is the small bucket
    assert res.accepted, res.reasons
    record = res.compile_info["scored_features"]
    by_shapes = {tuple(b["shapes"]): b for b in record["buckets"]}
    assert set(by_shapes) == {("m16",), ("m64",)} and record["missing"] == []
    assert by_shapes[("m16",)]["features"] == [] and by_shapes[("m16",)]["missing"] == ["wgmma"]
    (kernel,) = by_shapes[("m64",)]["kernels"]
    assert kernel["constexprs"]["USE_DOT"] is True and kernel["features"] == ["wgmma"]
    assert "wgmma" not in res.compile_info["features"]      # what the one-run compile gate saw


@pytest.mark.interpreter
def test_rejected_when_no_scored_shape_runs_the_feature_and_the_reason_lists_what_each_bucket_uses(tmp_path):
    res = _bench_tiny(tmp_path, (SMALL,), ("wgmma",))
    assert res.failed_stage == "compile"
    reason = " ".join(res.reasons)
    assert "required feature wgmma missing" in reason and "shape m16: _tiny_mm_kernel" in reason
    assert "USE_DOT=False" in reason and "uses none of them" in reason
    res = _bench_tiny(tmp_path, (SMALL, LARGE), ("tma",))
    reason = " ".join(res.reasons)
    assert res.failed_stage == "compile" and "required feature tma missing" in reason
    assert "shape m64: _tiny_mm_kernel (BLOCK_M=64, K=32, N=32, USE_DOT=True; 4 warps" in reason
    assert "USE_DOT=True; 4 warps, 3 stages) uses wgmma" in reason and "To use tma: load through" in reason


@pytest.mark.gpu
def test_the_fused_moe_seed_passes_require_wgmma_on_its_hot_set():
    """Issue 12: the hot prefill shape's bucket lowers tl.dot to wgmma; the tiny compile-gate run does not."""
    moe = load_operator("fused_moe")
    res = evaluate(make_request("fused_moe", Path(moe.seed_path).read_text(), moe.select("hot"), trials=1,
                                holdout=False, timing=False, require_features=("wgmma",)))
    assert res.accepted, res.reasons
    record = res.compile_info["scored_features"]
    assert any("wgmma" in b["features"] for b in record["buckets"]), record
    assert all(k["how"] == "launched" for b in record["buckets"] for k in b["kernels"])   # nothing compiled again
