"""Measure the present GPU's ceilings: HBM bandwidth, bf16 and fp8 matmul rates, and the latency floor.

`aka calibrate` stores the result with benchmarks.hardware.save_calibration; scores are then reported
against both these and the datasheet ceilings. Rules that keep the ceilings honest:
- random data only: zeros run faster (less switching power, so higher clocks), and would inflate peaks;
- each timed interval runs well past launch overhead (>= several ms) on data many times the L2;
- the best of several medians: a ceiling is what the card can do, the median keeps one lucky interval out.
Bandwidth is the best of a device-to-device copy (read + write bytes) and read-only streaming reductions
(torch's sum and our Triton reader): a copy alone under-reads the card (DESIGN.md, roofline counting).

Run: `python -m benchmarks.calibrate [--quick] [--device N]` prints the JSON.
"""
from __future__ import annotations

import argparse
import datetime
import json
from typing import Callable

import torch
import triton
import triton.language as tl

from benchmarks import gpu_timer

MATMUL_N = 8192
# (BLOCK, ITERS, num_warps) of the streaming reader; each program reads BLOCK * ITERS fp32 values.
READ_CONFIGS = ((4096, 4, 8), (8192, 2, 8), (2048, 8, 4))


@triton.jit
def _stream_read_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    # Sum a contiguous chunk: every byte is read once; the one stored partial keeps the loads alive.
    base = tl.program_id(0).to(tl.int64) * BLOCK * ITERS
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + tl.program_id(0), tl.sum(acc, axis=0))


def stream_read(x: torch.Tensor, partial: torch.Tensor | None = None, block: int = 4096, iters: int = 4,
                num_warps: int = 8) -> torch.Tensor:
    """Per-program partial sums of a contiguous fp32 tensor (their sum is x.sum())."""
    n = x.numel()
    programs = triton.cdiv(n, block * iters)
    if partial is None:
        partial = torch.empty(programs, dtype=torch.float32, device=x.device)
    _stream_read_kernel[(programs,)](x, partial, n, BLOCK=block, ITERS=iters, num_warps=num_warps)
    return partial


def time_back_to_back_s(op: Callable[[], object], inner: int) -> float:
    """Seconds per op over `inner` back-to-back launches between two CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(inner):
        op()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / inner


def best_of_medians(op: Callable[[], object], *, rounds: int, reps: int, inner: int) -> tuple[float, list[float]]:
    """(smallest of `rounds` medians, the medians), each median over `reps` timings of `inner` ops."""
    op()
    torch.cuda.synchronize()
    medians = [gpu_timer.median([time_back_to_back_s(op, inner) for _ in range(reps)]) for _ in range(rounds)]
    return min(medians), medians


def _warm_clocks(op: Callable[[], object], seconds: float) -> None:
    """Run op until the GPU has been busy `seconds`: boost clocks settle before anything is timed."""
    per = time_back_to_back_s(op, 2)
    for _ in range(max(1, int(seconds / max(per, 1e-6)))):
        op()
    torch.cuda.synchronize()


def measure_bandwidth(nbytes: int, rounds: int, reps: int, inner: int) -> dict:
    src = torch.rand(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    detail: dict = {"bytes_per_buffer": src.nbytes, "rounds": rounds, "reps": reps, "inner": inner}
    t, med = best_of_medians(lambda: dst.copy_(src), rounds=rounds, reps=reps, inner=inner)
    detail["copy_tbs"] = 2 * src.nbytes / t / 1e12           # read + write
    detail["copy_medians_tbs"] = [2 * src.nbytes / m / 1e12 for m in med]
    t, med = best_of_medians(lambda: torch.sum(src), rounds=rounds, reps=reps, inner=inner)
    detail["read_sum_tbs"] = src.nbytes / t / 1e12
    best_reader = None
    for block, iters, warps in READ_CONFIGS:
        key = f"read_triton_tbs[{block}x{iters},w{warps}]"
        try:
            partial = stream_read(src, None, block, iters, warps)
            t, _ = best_of_medians(lambda: stream_read(src, partial, block, iters, warps),
                                   rounds=rounds, reps=reps, inner=inner)
        except Exception as exc:       # our reader failing must not cost the copy and sum measurements
            detail[key] = f"error: {type(exc).__name__}: {exc}"[:300]
            continue
        detail[key] = src.nbytes / t / 1e12
        best_reader = max(best_reader or 0.0, detail[key])
    detail["read_triton_tbs"] = best_reader
    detail["best"] = max(("copy_tbs", "read_sum_tbs", "read_triton_tbs"), key=lambda k: detail[k] or 0.0)
    return detail


def measure_bf16_tflops(n: int, rounds: int, reps: int, inner: int) -> dict:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    op = lambda: torch.matmul(a, b, out=c)   # noqa: E731
    _warm_clocks(op, 0.3)
    t, med = best_of_medians(op, rounds=rounds, reps=reps, inner=inner)
    flops = 2.0 * n ** 3
    return {"tflops": flops / t / 1e12, "medians_tflops": [flops / m / 1e12 for m in med], "shape": [n, n, n]}


def measure_fp8_tflops(n: int, rounds: int, reps: int, inner: int) -> dict:
    """torch._scaled_mm with e4m3 operands and per-tensor scales; {"error": ...} where it is unavailable."""
    if not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability() < (8, 9):
        return {"error": f"no fp8 matmul: torch._scaled_mm needs compute capability >= 8.9, "
                         f"this GPU is {torch.cuda.get_device_capability()}"}
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()      # column-major, as cuBLASLt wants
    one = torch.ones((), device="cuda", dtype=torch.float32)
    flops = 2.0 * n ** 3
    out: dict = {"shape": [n, n, n]}
    for fast in (False, True):
        op = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,  # noqa: E731
                                      use_fast_accum=fast)
        try:
            _warm_clocks(op, 0.2)
            t, med = best_of_medians(op, rounds=rounds, reps=reps, inner=inner)
        except (RuntimeError, TypeError) as exc:
            out[f"fast_accum={fast}"] = f"error: {exc}"
            continue
        out[f"fast_accum={fast}"] = flops / t / 1e12
        out["tflops"] = max(out.get("tflops", 0.0), flops / t / 1e12)
    if "tflops" not in out:
        out["error"] = "torch._scaled_mm failed for both accumulation modes"
    return out


def _driver_and_clocks(device: int) -> tuple[str, dict]:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            handle = pynvml.nvmlDeviceGetHandleByIndex(device)
            clocks = {"sm": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                      "sm_max": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
                      "mem": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)}
        finally:
            pynvml.nvmlShutdown()
        return driver.decode() if isinstance(driver, bytes) else str(driver), clocks
    except Exception as exc:     # no NVML library or no driver: still report the measurements
        return f"unknown ({type(exc).__name__}: {exc})", {}


def calibrate(device: int = 0, quick: bool = False) -> dict:
    """Measured ceilings of GPU `device`; `quick` trades repetitions (not sizes) for time."""
    if not torch.cuda.is_available():
        raise RuntimeError("calibrate needs a CUDA GPU; none is visible (torch.cuda.is_available() is False)")
    rounds, reps, inner = (2, 5, 5) if quick else (5, 10, 10)
    with torch.cuda.device(device):
        bandwidth = measure_bandwidth((1 << 30) if quick else (2 << 30), rounds, reps, inner)
        bf16 = measure_bf16_tflops(MATMUL_N, rounds, reps, inner)
        fp8 = measure_fp8_tflops(MATMUL_N, rounds, reps, inner)
        t_floor_s = gpu_timer.measure_floor_s(reps=20 if quick else 50)
        gpu_name = torch.cuda.get_device_name(device)
    driver, clocks = _driver_and_clocks(device)
    peaks = {"bf16": bf16["tflops"]}
    if "tflops" in fp8:
        peaks["fp8"] = fp8["tflops"]
    return {"gpu_name": gpu_name, "bandwidth_tbs": bandwidth[bandwidth["best"]], "bandwidth_detail": bandwidth,
            "peaks_tflops": peaks, "peaks_detail": {"bf16": bf16, "fp8": fp8},
            "t_floor_us": t_floor_s * 1e6,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "triton": triton.__version__, "driver": driver, "clocks_mhz": clocks,
            "quick": quick}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.calibrate", description="measure this GPU's ceilings")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    print(json.dumps(calibrate(args.device, args.quick), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
