"""`aka bench --require FEATURE` (SandboxSettings.require_features): the compile gate reads the PTX/SASS of the
kernels compiled for sm_90 (offline without a GPU) and rejects a kernel that lacks a required feature,
naming what it does use. The compute-bound gemm seed passes --require wgmma; its TMA switch adds tma."""
from pathlib import Path

import pytest

from sandbox_requests import make_request

from benchmarks.registry import load_operator
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
    assert "required feature tma is missing" in reason and "found: cp.async, wgmma" in reason
    assert "wgmma is missing" not in reason


@pytest.mark.interpreter
def test_the_tma_switch_passes_wgmma_and_tma():
    source = Path(GEMM.seed_path).read_text().replace("TMA=0, PERSISTENT=0", "TMA=1, PERSISTENT=1")
    assert source.count("TMA=1, PERSISTENT=1") == 5
    res = _bench(source, ("wgmma", "tma"))
    assert res.accepted, res.reasons
    assert {"wgmma", "tma"} <= set(res.compile_info["features"])
