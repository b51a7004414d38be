"""Compile ahead on a real GPU: a fused_moe candidate whose tiles no cache holds gets its visible and hold-out
specializations compiled in forked processes before its trials, and is judged exactly as with the pass off.
The visible pass runs before the compile gate, so the gate's first run loads its kernels from the cache.

gpu-marked: skipped without CUDA (tests/conftest.py). Run on the H200 with `make test-gpu`.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from sandbox.evaluation import EvalRequest, evaluate
from sandbox.settings import SandboxSettings

pytestmark = pytest.mark.gpu


def _request(ahead: bool, block_n: int) -> EvalRequest:
    spec = load_operator("fused_moe")
    # a fresh source each time (a tile no earlier evaluation compiled): every specialization is new
    source = Path(spec.seed_path).read_text().replace("BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=2",
                                                      f"BLOCK_N={block_n}, BLOCK_K=128, num_warps=8, num_stages=2")
    shapes = tuple(s for s in spec.select("hot") if dict(s.dims)["T"] <= 64)[:3]
    settings = dataclasses.replace(SandboxSettings(), compile_ahead=ahead, prestart=False, compile_cache=False)
    return EvalRequest(op="fused_moe", source=source, shapes=shapes, hardware=load_hardware("h200"),
                       settings=settings, timing=False)


def test_compile_ahead_fills_the_cache_and_changes_no_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))    # the workers' cache: empty, whatever ran before
    on = evaluate(_request(True, 64))
    assert on.verdict == "accepted", on.reasons
    ahead = on.environment.get("compile_ahead") or {}
    assert ahead.get("specializations", 0) > 0 and ahead.get("failed") == 0 and ahead.get("killed") == 0, ahead
    held = on.environment.get("compile_ahead_holdouts") or {}
    assert held.get("specializations", 0) > 0 and held.get("failed", 0) == 0 and "notes" not in held, held
    off = evaluate(_request(False, 32))
    assert off.verdict == "accepted", off.reasons
    assert "compile_ahead" not in off.environment
    for name, res in (("on", on), ("off", off)):      # for the session's log (pytest -s): where the seconds went
        stages = dict(res.stage_times)
        print(f"compile_ahead {name}: wall {res.wall_s:.1f} s; " + ", ".join(
            f"{k} {stages[k]:.1f}" for k in ("compile.first_run", "compile_ahead", "correctness", "holdouts",
                                              "holdouts/compile_ahead") if k in stages))
