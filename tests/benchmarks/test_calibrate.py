"""benchmarks/calibrate.py: the streaming reader under the interpreter, the no-GPU refusal on the CPU,
and a quick calibration on a GPU (sanity ranges only: no performance assertions)."""
import json
import math

import pytest
import torch

from benchmarks import calibrate
from benchmarks.hardware import load_hardware


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.interpreter
@pytest.mark.parametrize("n, block, iters", [(1000, 64, 2), (64 * 3, 64, 1), (5, 32, 4)])
def test_stream_read_partials_sum_to_the_whole(n, block, iters):
    g = torch.Generator().manual_seed(n)
    x = (torch.rand(n, generator=g) + 0.5).to(_device())
    partial = calibrate.stream_read(x, None, block=block, iters=iters, num_warps=4)
    assert partial.numel() == math.ceil(n / (block * iters))
    assert partial.sum().item() == pytest.approx(x.sum().item(), rel=1e-5)
    # Each program sums its own contiguous chunk.
    assert partial[0].item() == pytest.approx(x[: block * iters].sum().item(), rel=1e-5)


def test_calibrate_refuses_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the refusal path cannot be reached")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        calibrate.calibrate(quick=True)


@pytest.mark.gpu
def test_quick_calibration_gives_positive_plausible_ceilings():
    m = calibrate.calibrate(device=0, quick=True)
    assert m["gpu_name"] == torch.cuda.get_device_name(0)
    assert 0.1 < m["bandwidth_tbs"] < 20.0
    d = m["bandwidth_detail"]
    assert m["bandwidth_tbs"] == max(d["copy_tbs"], d["read_sum_tbs"], d["read_triton_tbs"])
    assert all(v > 0 for v in (d["copy_tbs"], d["read_sum_tbs"], d["read_triton_tbs"]))
    assert 1.0 < m["peaks_tflops"]["bf16"] < 5000.0
    if torch.cuda.get_device_capability() >= (8, 9):
        assert 1.0 < m["peaks_tflops"]["fp8"] < 10000.0, m["peaks_detail"]["fp8"]
    assert 0.0 < m["t_floor_us"] < 20.0
    assert m["torch"] == torch.__version__ and m["date"] and m["driver"]
    json.dumps(m)
    # The result is what hardware.py expects to store and load.
    hw = load_hardware("h200").with_calibration(m)
    assert hw.source == "calibrated" and hw.bandwidth_tbs == m["bandwidth_tbs"]
    assert hw.peaks_tflops["bf16"] == m["peaks_tflops"]["bf16"]
