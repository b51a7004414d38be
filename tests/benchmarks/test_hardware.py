import pytest

from benchmarks.hardware import (hardware_for_gpu, list_hardware, load_calibrated, load_hardware,
                                 save_calibration)
from benchmarks.roofline import roofline


def test_profiles_exist_with_every_dtype():
    assert {"h200", "h100", "h20", "b200", "a100"} <= set(list_hardware())
    for name in list_hardware():
        hw = load_hardware(name)
        for dtype in ("bf16", "fp16", "fp8", "tf32", "fp32"):
            assert hw.peak_flops(dtype) > 0
        assert hw.bandwidth_tbs > 0 and hw.sm_count > 0 and hw.l2_mb > 0


def test_h200_datasheet_numbers():
    hw = load_hardware("h200")
    assert hw.peaks_tflops["bf16"] == 989.4 and hw.peaks_tflops["fp8"] == 1978.9
    assert hw.bandwidth_tbs == 4.8 and hw.source == "datasheet"


def test_unknown_hardware_lists_known():
    with pytest.raises(KeyError, match="h200"):
        load_hardware("z9000")


def test_gpu_name_maps_to_profile():
    assert hardware_for_gpu("NVIDIA H200") == "h200"
    assert hardware_for_gpu("NVIDIA H100 80GB HBM3") == "h100"
    assert hardware_for_gpu("Quadro P400") is None


def test_calibration_round_trip_keeps_unmeasured_datasheet_peaks(tmp_path):
    assert load_calibrated(tmp_path, "h200") is None
    save_calibration(tmp_path, "h200", {"bandwidth_tbs": 4.3, "peaks_tflops": {"bf16": 790.0}})
    hw = load_calibrated(tmp_path, "h200")
    assert hw.source == "calibrated" and hw.bandwidth_tbs == 4.3
    assert hw.peaks_tflops["bf16"] == 790.0 and hw.peaks_tflops["fp8"] == 1978.9
    assert "fp8" in hw.notes["datasheet_kept"]


def test_roofline_by_hand():
    hw = load_hardware("h200")
    # 1 GFLOP bf16 and 48 MB: compute 1e9/989.4e12 = 1.0107 us, memory 48e6/4.8e12 = 10 us.
    r = roofline({"bf16": 1e9}, 48e6, hw)
    assert r.t_memory_s == pytest.approx(10e-6)
    assert r.t_compute_s == pytest.approx(1e9 / 989.4e12)
    assert r.bound == "memory" and r.t_roof_s == pytest.approx(10e-6)
    # Mixed dtypes add their times: 989.4 GFLOP bf16 (1 ms) + 66.9 GFLOP fp32 (1 ms).
    r2 = roofline({"bf16": 989.4e9, "fp32": 66.9e9}, 1.0, hw)
    assert r2.t_compute_s == pytest.approx(2e-3) and r2.bound == "compute"
