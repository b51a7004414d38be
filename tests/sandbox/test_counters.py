"""sandbox/counters.py: ncu CSV parsing, diagnoses, the ncu command and its failure paths on the CPU (a
stand-in ncu executable replays a recorded CSV); a real ncu run on a GPU machine that has Nsight Compute."""
import json
import os
import stat
import sys
import textwrap

import pytest

from sandbox import counters
from sandbox.counters import CounterRecord, KernelCounters
from sandbox.ncu_target import load_candidate

# ncu --csv --print-units base --metrics <counters.METRICS>, as Nsight Compute writes it: progress lines,
# then one row per launch and metric. Three launches: our kernel twice and a PyTorch fill kernel whose
# name holds commas; the Hopper wgmma pipe is n/a for kernels without wgmma; thousands separators.
SAMPLE_CSV = r'''==PROF== Connected to process 40211 (/usr/bin/python3.12)
==PROF== Profiling "_fused_kernel" - 0: 0%....50%....100% - 19 passes
==PROF== Profiling "void at::native::vectorized_elementwise_..." - 1: 0%....50%....100% - 19 passes
==PROF== Profiling "_fused_kernel" - 2: 0%....50%....100% - 19 passes
==PROF== Disconnected from process 40211
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","35.21"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","12,480"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","byte","1,024"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum","byte","176"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","255"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","42.10"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active","%","n/a"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","%","0"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","12.50"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","18.75"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","","0.52"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","","8.50"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio","","0.04"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio","","0.11"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio","","0.31"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","","1.00"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio","","0.42"
"0","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","","1.20"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","5.30"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1,984"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","byte","0"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum","byte","0"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","16"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","n/a"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active","%","n/a"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","%","0"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","3.10"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","6.20"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","","0"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","","2.10"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio","","0.05"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","","1.00"
"1","40211","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1UL>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","","0.80"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","36.02"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","12,160"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","byte","1,024"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum","byte","176"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","255"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","41.80"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active","%","n/a"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","%","0"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","12.90"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","19.10"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","","0.48"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","","8.30"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio","","0.06"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio","","0.09"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio","","0.29"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","","1.00"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio","","0.38"
"2","40211","python3.12","127.0.0.1","_fused_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","","1.26"
'''

FILL_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
               "std::array<char *, 1UL>>(int, T2, T3)")


def test_parse_gives_one_record_per_launch_in_order():
    ks = counters.parse_ncu_csv(SAMPLE_CSV)
    assert [k.kernel for k in ks] == ["_fused_kernel", FILL_KERNEL, "_fused_kernel"]


def test_parse_reads_units_separators_and_n_a():
    k = counters.parse_ncu_csv(SAMPLE_CSV)[0]
    assert k.duration_us == pytest.approx(12.48)             # "12,480" ns
    assert k.dram_pct == pytest.approx(35.21) and k.sm_pct == pytest.approx(12.5)
    assert k.achieved_occupancy_pct == pytest.approx(18.75) and k.l2_hit_pct == pytest.approx(42.1)
    assert k.registers == 255 and isinstance(k.registers, int)
    assert k.local_spill_bytes == pytest.approx(1024 + 176)
    assert k.tensor_pipe_pct == 0.0                          # hmma 0, gmma n/a
    fill = counters.parse_ncu_csv(SAMPLE_CSV)[1]
    assert fill.l2_hit_pct is None and fill.local_spill_bytes == 0.0 and fill.duration_us == pytest.approx(1.984)


def test_top_stalls_are_shares_of_warp_cycles_without_issuing_states():
    k = counters.parse_ncu_csv(SAMPLE_CSV)[0]
    total = 0.52 + 8.50 + 0.04 + 0.11 + 0.31 + 1.00 + 0.42 + 1.20
    assert [r for r, _ in k.top_stalls] == ["long_scoreboard", "wait", "barrier"]
    assert k.top_stalls[0][1] == pytest.approx(100 * 8.50 / total)
    assert all(r not in ("selected", "not_selected") for r, _ in k.top_stalls)


def test_scaled_units_and_the_wide_layout_parse_to_the_same_numbers():
    scaled = SAMPLE_CSV.replace('"ns","12,480"', '"usecond","12.48"').replace('"byte","1,024"', '"Kbyte","1.024"')
    k = counters.parse_ncu_csv(scaled)[0]
    assert k.duration_us == pytest.approx(12.48) and k.local_spill_bytes == pytest.approx(1200.0)
    wide = textwrap.dedent("""\
        ==PROF== Disconnected from process 7
        "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread"
        "","","","","","","","","","","","msecond","%","register/thread"
        "0","7","python3","h","_matmul_kernel","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","1.5","12.0","168"
        """)
    (m,) = counters.parse_ncu_csv(wide)
    assert m.kernel == "_matmul_kernel" and m.duration_us == pytest.approx(1500.0)
    assert m.dram_pct == 12.0 and m.registers == 168 and m.sm_pct is None and m.top_stalls == ()


def test_unknown_units_and_text_without_a_table_give_nothing():
    assert counters.parse_ncu_csv("==PROF== Connected to process 1\n==ERROR== something failed\n") == []
    odd = SAMPLE_CSV.replace('"ns","12,480"', '"fortnight","12,480"')
    assert counters.parse_ncu_csv(odd)[0].duration_us is None


def test_merge_launches_averages_each_kernel():
    merged = counters.merge_launches(counters.parse_ncu_csv(SAMPLE_CSV))
    assert [k.kernel for k in merged] == ["_fused_kernel", FILL_KERNEL]
    fused = merged[0]
    assert fused.duration_us == pytest.approx((12.48 + 12.16) / 2)
    assert fused.dram_pct == pytest.approx((35.21 + 36.02) / 2) and fused.registers == 255
    assert fused.top_stalls[0][0] == "long_scoreboard"


def _kernel(**kw):
    base = dict(kernel="_k", duration_us=10.0, dram_pct=None, sm_pct=None, achieved_occupancy_pct=None,
                l2_hit_pct=None, registers=None, local_spill_bytes=None, tensor_pipe_pct=None, top_stalls=())
    base.update(kw)
    return KernelCounters(**base)


def test_diagnoses_from_the_sample():
    record = CounterRecord(True, "", (({"T": 1, "H": 4096},
                                       counters.merge_launches(counters.parse_ncu_csv(SAMPLE_CSV))),), "")
    text = "\n".join(record.diagnoses())
    assert "[T=1 H=4096] _fused_kernel: memory-bound at 36% of DRAM peak" in text
    assert "not coalesced or too few are in flight" in text
    assert "registers 255 with 1.2 KB local spills: lower BLOCK sizes or num_stages" in text
    assert "top stall: long_scoreboard" in text and "waiting on global or local memory" in text
    assert "achieved occupancy 19%" in text
    assert "[T=1 H=4096] at::native::vectorized_elementwise_kernel: latency-bound" in text


@pytest.mark.parametrize("kw, expected", [
    (dict(dram_pct=88.0, sm_pct=20.0), "memory-bound at 88% of DRAM peak"),
    (dict(dram_pct=10.0, sm_pct=85.0, tensor_pipe_pct=3.0), "not on tensor cores"),
    (dict(dram_pct=10.0, sm_pct=85.0, tensor_pipe_pct=75.0), "compute-bound at 85% of SM throughput; tensor pipes 75%"),
    (dict(dram_pct=4.0, sm_pct=6.0), "latency-bound: DRAM 4% and SM 6%"),
    (dict(dram_pct=20.0, sm_pct=55.0), "SM-bound at 55%"),
    (dict(registers=168, local_spill_bytes=0.0), "registers 168 per thread allow only 12 of 64 warps"),
    (dict(top_stalls=(("math_pipe_throttle", 41.0),)), "top stall: math_pipe_throttle, 41% of warp cycles"),
])
def test_diagnosis_rules(kw, expected):
    assert any(expected in line for line in counters.diagnose_kernel(_kernel(**kw)))


def test_diagnoses_skip_minor_kernels_and_unavailable_records():
    big, small = _kernel(kernel="_big", duration_us=95.0, dram_pct=90.0), _kernel(kernel="_tiny", duration_us=5.0, dram_pct=1.0)
    lines = CounterRecord(True, "", (({"T": 8}, (big, small)),), "").diagnoses()
    assert lines and all("_big" in line for line in lines)
    assert CounterRecord(False, "ncu not found", (), "").diagnoses() == []


def test_to_json_is_plain_json():
    record = CounterRecord(True, "", (({"T": 1}, counters.merge_launches(counters.parse_ncu_csv(SAMPLE_CSV))),), "tail")
    d = json.loads(json.dumps(record.to_json()))
    assert d["available"] and d["shapes"][0]["dims"] == {"T": 1}
    assert d["shapes"][0]["kernels"][0]["kernel"] == "_fused_kernel" and d["diagnoses"] == record.diagnoses()


def test_refused_metrics_are_recognized_in_both_error_forms():
    out = ("==ERROR== Failed to find metric regex:^sm__pipe_tensor_op_gmma_cycles_active\\.avg\\."
           "pct_of_peak_sustained_active$\n")
    assert counters.unknown_metrics(out, counters.METRICS) == {counters.M_TENSOR[1]}
    stall = counters.STALL_PREFIX + "misc" + counters.STALL_SUFFIX
    out = f"==ERROR== Failed to access the following 2 metrics: {stall}, {counters.M_L2_HIT}\n"
    assert counters.unknown_metrics(out, counters.METRICS) == {stall, counters.M_L2_HIT}
    assert counters.unknown_metrics("==PROF== all fine\n", counters.METRICS) == set()


# ---------------------------------------------------------------- finding and running ncu

def _executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_find_ncu_on_a_path_and_in_fixed_locations(tmp_path):
    assert counters.find_ncu(path=str(tmp_path), locations=()) is None
    fake = _executable(tmp_path / "ncu", "#!/bin/sh\nexit 0\n")
    assert counters.find_ncu(path=str(tmp_path), locations=()) == fake
    other = tmp_path / "opt" / "2025.3.1"
    other.mkdir(parents=True)
    found = _executable(other / "ncu", "#!/bin/sh\nexit 0\n")
    assert counters.find_ncu(path=str(tmp_path / "none"), locations=(str(tmp_path / "opt" / "*" / "ncu"),)) == found


def test_without_ncu_the_record_says_so():
    r = counters.collect_using(None, "cand.py", "rms_norm", [{"T": 1}], "bf16")
    assert not r.available and r.reason.startswith("ncu not found on PATH") and r.shapes == ()
    assert counters.HAS_NCU == (counters.find_ncu() is not None)
    if not counters.HAS_NCU:
        assert not counters.collect("cand.py", "rms_norm", [{"T": 1}], "bf16").available


FAKE_NCU = """#!{python}
# Stands in for Nsight Compute: records its arguments, refuses the wgmma metric like an ncu that does
# not know it, else writes the recorded CSV to --log-file.
import json, sys, time
args = sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
mode = {mode!r}
if mode == "sleep":
    time.sleep(30)
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
metrics = args[args.index("--metrics") + 1].split(",")
if any("gmma" in m for m in metrics):
    print("==ERROR== Failed to find metric regex:^sm__pipe_tensor_op_gmma_cycles_active\\\\.avg\\\\.pct_of_peak_sustained_active$")
    sys.exit(1)
with open(args[args.index("--log-file") + 1], "w") as f:
    f.write(open({sample!r}).read())
"""


def _fake_ncu(tmp_path, mode="ok"):
    (tmp_path / "sample.csv").write_text(SAMPLE_CSV)
    calls = tmp_path / "calls.jsonl"
    text = FAKE_NCU.format(python=sys.executable, calls=str(calls), mode=mode, sample=str(tmp_path / "sample.csv"))
    return _executable(tmp_path / "ncu", text), calls


def test_collect_runs_the_target_under_ncu_and_drops_refused_metrics(tmp_path):
    ncu, calls = _fake_ncu(tmp_path)
    dims_list = [{"T": 1, "H": 4096}, {"T": 7, "H": 4096}]
    r = counters.collect_using(ncu, "cand.py", "rms_norm", dims_list, "bf16", timeout_s=120)
    assert r.available and [d for d, _ in r.shapes] == dims_list
    assert [k.kernel for k in r.shapes[0][1]] == ["_fused_kernel", FILL_KERNEL]
    assert "gmma" in r.reason and "hmma" not in r.reason and "_fused_kernel" in r.raw_csv_tail
    runs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert len(runs) == 3                          # one refused, then one per shape without the metric
    for args in runs:
        joined = " ".join(args)
        assert "--clock-control none" in joined and "--profile-from-start off" in joined and "--csv" in args
        assert f"{sys.executable} -m sandbox.ncu_target --op rms_norm --candidate" in joined
        assert args[args.index("--dtype") + 1] == "bf16"
    assert [json.loads(a[a.index("--dims") + 1]) for a in runs[1:]] == dims_list
    assert counters.M_TENSOR[1] not in runs[2][runs[2].index("--metrics") + 1]


def test_collect_reports_missing_permission_and_timeouts(tmp_path):
    ncu, _ = _fake_ncu(tmp_path, mode="perm")
    r = counters.collect_using(ncu, "cand.py", "rms_norm", [{"T": 1}], "bf16", timeout_s=60)
    assert not r.available and "ERR_NVGPUCTRPERM" in r.reason and "root" in r.reason
    ncu, _ = _fake_ncu(tmp_path, mode="sleep")
    r = counters.collect_using(ncu, "cand.py", "rms_norm", [{"T": 1}], "bf16", timeout_s=3)
    assert not r.available and "timed out" in r.reason


def test_ncu_target_loads_the_function_named_after_the_operator(tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text("def rms_norm(x, weight, eps=1e-6):\n    return ('called', x)\n")
    assert load_candidate(str(cand), "rms_norm")(1, 2) == ("called", 1)
    with pytest.raises(AttributeError, match="no function silu_mul"):
        load_candidate(str(cand), "silu_mul")
    with pytest.raises(FileNotFoundError):
        load_candidate(str(tmp_path / "missing.py"), "rms_norm")


@pytest.mark.gpu
def test_collect_on_a_seed_kernel_with_real_ncu():
    if not counters.HAS_NCU:
        pytest.skip("Nsight Compute (ncu) is not installed here")
    from benchmarks.registry import list_operators, load_operator
    ops = list_operators()
    if not ops:
        pytest.skip("no operator folders yet")
    spec = load_operator("rms_norm" if "rms_norm" in ops else ops[0])
    if not spec.shapes or not os.path.isfile(spec.seed_path):
        pytest.skip(f"{spec.name} has no shapes or seed")
    shape = min(spec.shapes, key=lambda s: sum(v for _, v in s.dims))
    r = counters.collect(spec.seed_path, spec.name, [shape.dim], shape.dtype, timeout_s=300)
    assert r.available, r.reason + "\n" + r.raw_csv_tail
    (dims, kernels), = r.shapes
    assert dims == shape.dim and kernels
    k = kernels[0]
    assert k.duration_us is not None and k.duration_us > 0 and k.registers and k.registers > 0
    assert k.dram_pct is not None and 0.0 <= k.dram_pct <= 100.0
    assert r.diagnoses()
