"""The sandbox on a real GPU: timing and scoring happen, attribution rejects hidden PyTorch work (on the first
shape, before any trial) and a small foreign share, the timed graph's replay is checked, a write into a
read-only input faults, a side stream and an out-of-bounds write are rejections, and the next evaluation
is unaffected.

gpu-marked: skipped without CUDA (tests/conftest.py). Run on the H200 with `make test-gpu`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.hardware import load_hardware
from benchmarks.spec import Shape
from sandbox_requests import make_request
from sandbox.evaluation import EvalRequest, evaluate, evaluate_unlinted

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
SHAPES = (Shape.make("t1", {"T": 1, "H": 4096}, dtype="bf16", weight=2.0),
          Shape.make("t64", {"T": 64, "H": 4096}, dtype="bf16", weight=1.0))

# One program per row, from the honest corpus (accepted there on the CPU and on the H200).
HONEST = (HERE / "honest" / "rms_norm_row_per_program.py").read_text()

# PyTorch does the work; a Triton kernel is launched only to look like a candidate.
HIDDEN_TORCH = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


def rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    _rms_norm_kernel[(1,)](y)
    return y
'''

# The right values, computed on a side stream the caller's stream never waits for, after a spin of a few
# milliseconds: a consumer on the caller's stream (and an event timer there) would see unfinished work.
SIDE_STREAM = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, stride_x, stride_y, eps, spins, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    acc = tl.sum(x * x, axis=0)
    t = acc
    for _ in range(spins):
        t = t * 0.999999 + 1e-7
    rstd = 1.0 / tl.sqrt(acc / H + eps) + tl.where(t < -1.0, 1.0, 0.0)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        _rms_norm_kernel[(T,)](x, weight, y, H, x.stride(0), y.stride(0), eps, 2000000,
                               BLOCK_H=triton.next_power_of_2(H))
    return y
'''


def request(source: str, **kw) -> EvalRequest:
    kw.setdefault("timeout_s", 600.0)
    return make_request("rms_norm", source, SHAPES, **kw)


def test_honest_kernel_is_timed_scored_and_described():
    res = evaluate(request(HONEST))
    assert res.accepted, res.reasons
    assert not res.interpreter and res.environment["gpu"] != "no GPU" and res.environment.get("driver")
    assert res.environment["device_name"]
    assert res.dsl_share is not None and res.dsl_share >= 0.9
    for row in res.visible_shapes():
        assert row.t_us > 0 and row.t_eager_us > 0 and row.t_floor_us > 0 and row.t_roof_us > 0
        assert row.timing_mode in ("graph", "eager")
        assert 0 < row.attainment <= 1
        assert row.bound in ("memory", "compute")
        assert row.max_abs_err is not None and row.rel_l2 is not None
    assert 0 < res.s_i <= 1 and 0 < res.weighted_attainment <= 1
    assert any(k["name"] == "_rms_norm_kernel" for k in res.compile_info.get("kernels", []))
    assert any(s.holdout and s.rel_l2 is not None for s in res.shapes)
    # both launches of the floor kernel are kept; the score's floor is the lesser (agent/run_floor.py)
    floors = res.environment["floor_us"]
    assert floors["plain"] > 0 and (floors["pdl"] is None or floors["pdl"] > 0)
    lesser = min(v for v in floors.values() if v is not None)
    assert all(row.t_floor_us == pytest.approx(lesser) for row in res.visible_shapes())
    # every timed batch (the floor's, each shape's) was queued whole behind the GPU's hold (gpu_timer.held_batch)
    hold = res.environment["timing_hold"]
    assert hold["batches"] >= 2 * (1 + len(res.visible_shapes())) and hold["unheld"] == 0, hold


def test_attribution_rejects_hidden_torch_work_on_the_first_shape_before_any_correctness_trial():
    res = evaluate_unlinted(request(HIDDEN_TORCH))   # the lint would stop it first; here the profiler must
    assert not res.accepted and res.failed_stage == "dsl", res.reasons
    assert res.dsl_share is not None and res.dsl_share < 0.9
    assert "shape t1: attribution rule" in res.reasons[0] and "Foreign kernels:" in res.reasons[0], res.reasons
    assert "no foreign kernels" not in res.reasons[0] and "%)" in res.reasons[0]
    assert list(res.attribution) == ["t1"]                      # the first shape only: rejected fast
    assert all(s.rel_l2 is None for s in res.shapes) and not any(s.holdout for s in res.shapes)


def test_a_foreign_kernel_with_a_small_share_is_rejected_and_named():
    source = (HERE / "redteam" / "rt_torch_rsqrt_small_share.py").read_text()
    shapes = (Shape.make("t4k", {"T": 4096, "H": 4096}, dtype="bf16"),)
    res = evaluate_unlinted(make_request("rms_norm", source, shapes, timeout_s=600.0))
    assert res.failed_stage == "dsl" and "attribution rule" in res.reasons[0], res.reasons
    assert "rsqrt" in res.reasons[0].lower(), res.reasons
    att = res.attribution["t4k"]
    assert 0.02 < att["foreign_share"] and att["own_us"] > 0, att


def test_the_timed_graph_is_replayed_on_fresh_inputs_and_a_capture_only_shortcut_is_rejected():
    source = (HERE / "redteam" / "rt_graph_capture_detect.py").read_text()
    res = evaluate_unlinted(request(source, holdout=False))    # the lint stops torch.cuda; the runtime must too
    assert res.failed_stage == "timing" and "timed-replay rule" in res.reasons[0], res.reasons


def test_a_kernel_that_writes_an_input_during_the_call_faults_on_read_only_inputs():
    res = evaluate(request((HERE / "redteam" / "rt_input_scratch_restored.py").read_text(), timing=False))
    assert res.failed_stage == "correctness" and res.reasons[0].startswith("input-write rule"), res.reasons
    assert "illegal" in res.reasons[0].lower() or "CUDA error" in res.reasons[0], res.reasons


def test_the_read_only_input_guard_is_available_on_this_gpu():
    import torch

    from sandbox.input_guard import guarded_inputs
    x = torch.randn(3, 1000, device="cuda")[:, 7:]
    g, how = guarded_inputs({"x": x})
    assert how == "cuda-vmm" and torch.equal(g["x"], x) and g["x"].stride() == x.stride()
    assert float((g["x"] * 2).sum()) == pytest.approx(float((x * 2).sum()), rel=1e-5)
    res = evaluate(request(HONEST, timing=False))
    assert res.accepted and not any("guard unavailable" in r for r in res.reasons), res.reasons


def test_work_on_an_unsynchronized_side_stream_is_rejected():
    res = evaluate_unlinted(request(SIDE_STREAM, holdout=False))   # the lint forbids streams; the runtime too
    assert not res.accepted and res.failed_stage == "correctness", res.reasons
    assert "side stream" in res.reasons[0]


def test_out_of_bounds_write_is_rejected_and_the_next_evaluation_is_unaffected():
    res = evaluate(request((HERE / "redteam" / "rt_oob_write.py").read_text()))
    assert not res.accepted
    text = " ".join(res.reasons)
    assert "illegal memory access" in text or "CUDA error" in text, res.reasons
    again = evaluate(request(HONEST, timing=False))
    assert again.accepted, again.reasons


def test_gpu_out_of_memory_is_a_rejection():
    src = HONEST.replace("    out = torch.empty((T, H)", "    big = torch.empty((1 << 44,), dtype=torch.uint8, device=x.device)\n"
                                                      "    out = torch.empty((T, H)")
    assert src != HONEST
    res = evaluate(request(src, timing=False))
    assert not res.accepted and "out of memory" in res.reasons[0].lower()


def test_baseline_eager_is_timed_without_lint_or_dsl():
    res = evaluate(request("", baseline="eager", counters=True, counter_shapes=1))
    assert res.accepted, res.reasons
    assert all(r.t_us > 0 and r.attainment is not None for r in res.visible_shapes())
    assert res.dsl_share is None and res.compile_info == {}
    assert "available" in res.counters


def test_counters_are_recorded_or_say_why_not():
    res = evaluate(request(HONEST, counters=True, counter_shapes=1))
    assert res.accepted, res.reasons
    assert "available" in res.counters
    if not res.counters["available"]:
        assert res.counters.get("reason")


def test_a_timing_only_evaluation_skips_eager_timing_and_a_full_one_keeps_it():
    timing_only = evaluate(request(HONEST, correctness=False))
    full = evaluate(request(HONEST))
    assert timing_only.accepted and full.accepted, (timing_only.reasons, full.reasons)
    for row in timing_only.visible_shapes():
        assert row.timing_mode == "graph" and row.t_us > 0 and row.t_eager_us is None
    assert all(row.t_eager_us > 0 for row in full.visible_shapes())


def test_a_run_sandbox_times_every_stage_and_reuses_the_sealed_cache():
    from sandbox.session import Sandbox
    from sandbox.settings import SandboxSettings
    with Sandbox(SandboxSettings(timeout_s=600.0)) as sb:
        first = sb(request(HONEST))
        second = sb(request(HONEST))
    assert first.accepted and second.accepted, (first.reasons, second.reasons)
    stages = dict(first.stage_times)
    for name in ("imports", "cuda_init", "compile.gate", "references", "correctness", "holdouts", "dsl", "floor",
                 "timing.graph", "timing.eager", "recheck"):
        assert name in stages, name
    assert any(k.startswith("compile.kernel._rms_norm_kernel") for k in stages)
    assert second.environment["worker_prestarted"] is True
    assert "sealed cache of this source reused" in second.environment["compile_cache"]


def test_ab_in_one_worker_gives_paired_rounds_for_both_kernels():
    from sandbox.session import Sandbox
    from sandbox.settings import SandboxSettings
    with Sandbox(SandboxSettings(timeout_s=600.0, ab_rounds=8)) as sb:
        series = sb.measure_ab(request(HONEST, correctness=False), HONEST)
    assert series.error is None, series.error
    assert series.shape_ids == tuple(s.id for s in SHAPES) and series.rounds == 8
    assert all(len(x) == 8 for x in series.a + series.b)
    assert series.floor_s and series.floor_s > 0
    # the same kernel on both sides: per-shape medians within a factor of two of each other
    import statistics
    for a, b in zip(series.a, series.b):
        assert 0.5 < statistics.median(a) / statistics.median(b) < 2.0


def test_ab_kernels_load_their_own_sealed_caches_instead_of_compiling_again():
    """Both kernels evaluated first (each source's directory sealed), then A/B'd: each kernel checks out
    its own directory, so the A/B's first calls load what the evaluations compiled."""
    from sandbox.session import Sandbox
    from sandbox.settings import SandboxSettings
    other = HONEST + "\n# the same kernel under another source text: its own cache directory\n"
    with Sandbox(SandboxSettings(timeout_s=600.0, ab_rounds=8)) as sb:
        assert sb(request(HONEST)).accepted and sb(request(other)).accepted
        series = sb.measure_ab(request(HONEST, correctness=False), other)
    assert series.error is None, series.error
    for key in ("compile_cache", "compile_cache_b"):
        assert "sealed cache of this source reused" in series.environment[key], series.environment
    stages = dict(series.stage_times)
    assert {"ab_rounds/inputs", "ab_rounds/warm_up", "ab_rounds/capture", "ab_rounds/rounds"} <= set(stages), stages
