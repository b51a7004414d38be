"""sandbox/timing.py and benchmarks/gpu_timer.py: statistics and trace attribution on the CPU; the graph
timer, its eager fallback, the floor and the profiler attribution on a GPU (no performance assertions)."""
import math
import random

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from benchmarks import gpu_timer
from sandbox import timing


# ---------------------------------------------------------------- statistics

@pytest.mark.parametrize("n", [1, 2, 5, 10, 51])
def test_quantiles_match_numpy(n):
    rng = random.Random(n)
    xs = [rng.uniform(1e-6, 1e-3) for _ in range(n)]
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert gpu_timer.quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)), rel=1e-12)


def test_spread_is_interquartile_range_over_median():
    assert gpu_timer.spread([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0 / 3.0)
    assert gpu_timer.spread([7.0]) == 0.0
    assert gpu_timer.spread([-1.0, 0.0, 1.0]) == math.inf


def test_statistics_refuse_nothing_and_bad_quantiles():
    with pytest.raises(ValueError, match="no samples"):
        gpu_timer.median([])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gpu_timer.quantile([1.0], 1.5)


def test_per_call_samples_subtract_the_flush_only_replay():
    assert gpu_timer.per_call_samples([12e-6, 14e-6], [2e-6, 4e-6], 10) == pytest.approx([1e-6, 1e-6])
    with pytest.raises(ValueError, match="pair them"):
        gpu_timer.per_call_samples([1.0, 2.0], [1.0], 10)
    with pytest.raises(ValueError, match=">= 1"):
        gpu_timer.per_call_samples([1.0], [1.0], 0)


def test_replay_count_follows_reps_for_slow_calls_and_time_for_fast_ones():
    # A 10 ms replay: reps=50 with 10 calls a graph is 5 pairs (the minimum).
    assert gpu_timer.replay_count(10e-3, reps=50, calls=10) == 5
    assert gpu_timer.replay_count(10e-3, reps=200, calls=10) == 20
    # A 0.7 ms replay (flush-dominated): ~20 ms of replays.
    assert gpu_timer.replay_count(0.7e-3, reps=50, calls=10) == math.ceil(0.02 / 0.7e-3)
    assert gpu_timer.replay_count(1e-9, reps=50, calls=10) == gpu_timer.MAX_SAMPLES


def test_summarize_scores_graph_samples_and_keeps_eager_beside_them():
    r = timing.summarize([1e-6, 2e-6, 3e-6], [5e-6, 6e-6, 7e-6, 8e-6, 9e-6], None)
    assert r.t_graph_s == pytest.approx(2e-6) and r.t_eager_s == pytest.approx(7e-6)
    assert r.samples == 3 and r.spread == pytest.approx(1e-6 / 2e-6) and r.mode == "graph"
    assert r.t_s == r.t_graph_s


def test_summarize_falls_back_to_eager_with_the_reason():
    r = timing.summarize(None, [4e-6, 5e-6, 9e-6], "CUDA graph capture failed (...)")
    assert r.t_graph_s is None and r.mode == "eager" and r.t_s == pytest.approx(5e-6)
    assert r.samples == 3 and r.graph_error.startswith("CUDA graph capture failed")
    with pytest.raises(ValueError, match="no eager samples and no graph samples"):
        timing.summarize(None, [], "CUDA graph capture failed (...)")


def test_summarize_without_eager_samples_scores_the_graph_and_reports_no_eager_time():
    r = timing.summarize([1e-6, 3e-6], [], None)       # time_call(eager=False) with a captured graph
    assert r.t_eager_s is None and r.mode == "graph" and r.t_s == pytest.approx(2e-6) and r.samples == 2


def test_time_call_refuses_no_input_sets_before_touching_the_gpu():
    with pytest.raises(ValueError, match="0 input sets"):
        timing.time_call(lambda d: None, [])
    with pytest.raises(ValueError, match="reps=0"):
        timing.time_call(lambda d: None, [{}], reps=0)


# ---------------------------------------------------------------- profiler attribution

def test_kernel_names_match_exactly_or_with_the_legacy_triton_suffix():
    names = {"_rms_norm_kernel", "sm90"}
    assert timing.is_candidate_kernel("_rms_norm_kernel", names)
    assert timing.is_candidate_kernel("_rms_norm_kernel_0d1d2de", names)
    assert not timing.is_candidate_kernel("_rms_norm_kernel_v2", names)
    # A jit function named like a vendor kernel's prefix must not claim that kernel's time.
    assert not timing.is_candidate_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", names)
    assert not timing.is_candidate_kernel("void at::native::vectorized_elementwise_kernel<4>", names)


TRACE = {"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 0, "dur": 50.0},
    {"ph": "X", "cat": "cuda_runtime", "name": "cuLaunchKernelEx", "ts": 1, "dur": 4.0},
    {"ph": "X", "cat": "kernel", "name": "_rms_norm_kernel", "ts": 10, "dur": 30.0},
    {"ph": "X", "cat": "kernel", "name": "_rms_norm_kernel", "ts": 60, "dur": 30.0},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 5, "dur": 2.5},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "ts": 7, "dur": 7.5},
    {"ph": "X", "cat": "kernel", "name": "void at::native::reduce_kernel<512, 1>", "ts": 95, "dur": 20.0},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "aten::add", "ts": 10, "dur": 80.0},
    {"ph": "i", "cat": "kernel", "name": "_rms_norm_kernel", "ts": 10},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "ts": 10},
]}


def test_gpu_times_from_trace_sums_kernels_memsets_and_memcpys_only():
    times = timing.gpu_times_from_trace(TRACE)
    assert times == {"_rms_norm_kernel": 60.0, "Memset (Device)": 2.5, "Memcpy DtoD (Device -> Device)": 7.5,
                     "void at::native::reduce_kernel<512, 1>": 20.0}


def test_attribution_counts_memsets_copies_and_fills_as_neutral_and_the_rest_as_foreign():
    activity = timing.gpu_activity_from_trace(TRACE)
    att = timing.attribute(activity, {"_rms_norm_kernel"})
    assert att.own_us == 60.0
    assert att.neutral_us == {"Memset (Device)": 2.5, "Memcpy DtoD (Device -> Device)": 7.5}
    assert att.foreign_us == {"void at::native::reduce_kernel<512, 1>": 20.0}
    assert att.own_share == pytest.approx(60.0 / 80.0) and att.foreign_share == pytest.approx(0.25)
    assert att.top_foreign(1) == [("void at::native::reduce_kernel<512, 1>", 20.0, pytest.approx(0.25))]
    nobody = timing.attribute(activity, {"_other_kernel"})
    assert nobody.own_us == 0.0 and nobody.own_share == 0.0
    assert timing.attribute({}, {"_rms_norm_kernel"}).own_share == 0.0


def test_attribution_neutral_work_is_only_work_that_computes_nothing():
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    cast = "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda, std::array<char*, 2ul> >"
    activity = {"_k": ("kernel", 97.0), fill: ("kernel", 50.0), cast: ("kernel", 3.0),
                "Memcpy DtoH (Device -> Pageable)": ("gpu_memcpy", 1.0), "Memcpy HtoD (Pageable -> Device)": ("gpu_memcpy", 4.0)}
    att = timing.attribute(activity, {"_k"})
    assert set(att.neutral_us) == {fill, "Memcpy HtoD (Pageable -> Device)"}
    assert set(att.foreign_us) == {cast, "Memcpy DtoH (Device -> Pageable)"}   # a cast computes; DtoH feeds the host
    assert att.foreign_share == pytest.approx(4.0 / 101.0) and att.foreign_share > timing.FOREIGN_COMPUTE_MAX_SHARE
    named_like_fill = timing.attribute({"FillFunctor": ("kernel", 5.0)}, {"FillFunctor"})
    assert named_like_fill.own_us == 5.0                        # the candidate's own names win
    record = att.to_json()
    assert record["own_us"] == 97.0 and record["foreign_share"] == pytest.approx(att.foreign_share)


# ---------------------------------------------------------------- the floor kernel, under the interpreter

@pytest.mark.interpreter
def test_floor_kernel_copies_its_one_value():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sets = gpu_timer.floor_input_sets(2, device=device)
    for s in sets:
        gpu_timer.floor_call(s)
        assert s["dst"].item() == s["src"].item() and s["src"].item() >= 1.0


# ---------------------------------------------------------------- GPU

@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _copy(inputs):
    x = inputs["x"]
    y = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def _sets(numel, n=3):
    return [{"x": torch.rand(numel, device="cuda")} for _ in range(n)]


@pytest.mark.gpu
def test_time_call_tiny_copy_graph_is_below_eager():
    r = timing.time_call(_copy, _sets(1024), reps=50)
    assert r.graph_error is None and r.t_graph_s is not None
    assert 1e-7 < r.t_graph_s < 1.0 and 1e-7 < r.t_eager_s < 1.0
    assert r.t_graph_s < r.t_eager_s          # host launch overhead is out of the graph time
    assert r.samples >= gpu_timer.MIN_SAMPLES and r.spread >= 0.0


@pytest.mark.gpu
def test_time_call_large_copy_moves_a_plausible_bandwidth():
    numel = 64 << 20                            # 256 MiB read + 256 MiB written
    r = timing.time_call(_copy, _sets(numel, 2), reps=20)
    assert r.t_graph_s is not None and 1e-6 < r.t_graph_s < 1.0
    tbs = 2 * numel * 4 / r.t_graph_s / 1e12
    assert 0.1 < tbs < 20.0, f"{tbs:.2f} TB/s is not a plausible HBM bandwidth"


@pytest.mark.gpu
def test_host_sync_cannot_be_captured_and_is_timed_eagerly():
    def with_item(inputs):
        y = _copy(inputs)
        if y[0].item() > 2.0:                   # a host sync: illegal inside a capture
            y = y + 1
        return y

    r = timing.time_call(with_item, _sets(4096), reps=10)
    assert r.t_graph_s is None and r.mode == "eager"
    assert "capture failed" in r.graph_error and ".item()" in r.graph_error
    assert 1e-7 < r.t_eager_s < 1.0 and r.samples == 10
    # The CUDA context is still usable after the failed capture.
    assert timing.time_call(_copy, _sets(4096), reps=10).t_graph_s is not None


@pytest.mark.gpu
def test_work_on_a_detached_side_stream_is_not_graph_timed():
    side = torch.cuda.Stream()

    def detached(inputs):
        x = inputs["x"]
        y = torch.empty_like(x)
        with torch.cuda.stream(side):           # never waits on, nor rejoins, the current stream
            _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y

    r = timing.time_call(detached, _sets(1 << 20), reps=10)
    assert r.t_graph_s is None and r.graph_error
    assert 1e-7 < r.t_eager_s < 1.0


@pytest.mark.gpu
def test_dsl_attribution_gives_triton_time_to_the_candidate_and_matmul_time_to_foreign_kernels():
    inputs = {"x": torch.rand(1 << 22, device="cuda")}
    att = timing.dsl_attribution(_copy, inputs, {"_copy_kernel"})
    assert att.own_share > 0.98 and att.own_us > 0.0
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    att = timing.dsl_attribution(lambda d: torch.matmul(d["a"], d["a"]), {"a": a}, {"_copy_kernel"})
    assert att.own_us == 0.0 and att.foreign_share == 1.0 and sum(att.foreign_us.values()) > 0.0
    zeros = timing.dsl_attribution(lambda d: (torch.zeros(1 << 20, device="cuda"), _copy(d)), inputs, {"_copy_kernel"})
    assert zeros.neutral_us and zeros.foreign_share == 0.0     # torch.zeros is a fill: neutral


@pytest.mark.gpu
def test_measure_floor_is_a_small_positive_time():
    t = timing.measure_floor(reps=20)
    assert 0.0 < t < 20e-6


@pytest.mark.gpu
def test_the_floor_is_the_lesser_of_the_plain_and_the_pdl_launch():
    from benchmarks import gpu_timer
    plain = gpu_timer.measure_floor_s(reps=20, pdl=False)
    assert 0.0 < plain < 20e-6
    if not gpu_timer.pdl_available():
        assert gpu_timer.measure_floor_s(reps=20) > 0.0
        return
    assert 0.0 < gpu_timer.measure_floor_s(reps=20, pdl=True) < 20e-6      # the PDL launch runs and is timed
    assert 0.0 < gpu_timer.measure_floor_s(reps=20) < 20e-6


def test_refill_inputs_copies_into_the_captured_buffers_and_refuses_what_a_graph_baked_in():
    sets = [{"x": torch.zeros(4), "eps": 1e-6}, {"x": torch.ones(4), "eps": 1e-6}]
    ptrs = [s["x"].data_ptr() for s in sets]
    fresh = {"x": torch.arange(4.0), "eps": 1e-6}
    assert timing.refill_inputs(sets, fresh) is None
    assert [s["x"].data_ptr() for s in sets] == ptrs and all(torch.equal(s["x"], fresh["x"]) for s in sets)
    why = timing.refill_inputs(sets, {"x": torch.arange(4.0), "eps": 1e-5})
    assert why and "'eps'" in why and "baked into the capture" in why
    assert "does not match" in timing.refill_inputs(sets, {"x": torch.arange(5.0), "eps": 1e-6})
    assert torch.equal(sets[0]["x"], torch.arange(4.0))          # nothing copied when any set does not match


@pytest.mark.gpu
def test_replay_on_fresh_inputs_replays_what_was_timed():
    sets = [{"x": torch.rand(1 << 16, device="cuda")} for _ in range(2)]
    kept: dict = {}
    r = timing.time_call(_copy, sets, reps=10, keep=kept)
    assert r.t_graph_s is not None and kept["graph"] is not None
    fresh = {"x": torch.rand(1 << 16, device="cuda")}
    out, why = timing.replay_on_fresh_inputs(kept, sets, fresh)
    # a list: the call's one output (no n_outputs given), then the mutated arguments (none here)
    assert why is None and len(out) == 1 and torch.equal(out[0], fresh["x"])
    assert timing.replay_on_fresh_inputs({}, sets, fresh)[1].startswith("no CUDA graph")
