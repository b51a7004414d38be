"""Weights from profiler traces: a real torch.profiler trace of a tiny model on the CPU, read back and attributed
by configs/kernel_map.yaml; unmapped time is kept and named; the weights file round-trips."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.weights_trace import (TraceError, WeightsFileError, load_map, load_weights, match,
                                      read_trace, weights_from_traces)

MAP = Path(__file__).resolve().parents[2] / "configs" / "kernel_map.yaml"


class Tiny(torch.nn.Module):
    """rms-norm (annotated as `aka trace` does), a linear layer (gemm by its cpu op), and a softmax no rule names."""

    def __init__(self, H=32, N=48):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(H))
        self.proj = torch.nn.Linear(H, N, bias=False)

    def forward(self, x):
        with torch.profiler.record_function(f"aka:rms_norm[T={x.shape[0]},H={x.shape[1]}]"):
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
        return torch.softmax(self.proj(x), dim=-1)


def real_trace(path: Path, T=8, phase="decode") -> Path:
    model, x = Tiny(), torch.randn(T, 32)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            model(x)
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    data["aka"] = {"phase": phase}
    path.write_text(json.dumps(data))
    return path


def test_a_real_cpu_trace_is_attributed_and_unmapped_time_is_kept(tmp_path):
    trace = real_trace(tmp_path / "t.json")
    units, meta, device = read_trace(trace)
    assert device == "cpu" and meta["phase"] == "decode"
    rules = load_map(MAP)
    got = {}
    for u in units:
        op, dims = match(rules, u)
        got.setdefault(op, set()).add(tuple(sorted((dims or {}).items())))
    assert (("H", 32), ("T", 8)) in got["rms_norm"]            # shape from the annotation
    assert (("K", 32), ("M", 8), ("N", 48)) in got["gemm"]     # shape from aten::linear's Input Dims
    assert "unmapped" in got                                    # softmax has no rule
    w = weights_from_traces([trace], rules)
    assert sum(e["weight"] for e in w.entries) == pytest.approx(1.0)
    assert w.total_us == pytest.approx(sum(u.dur_us for u in units))     # nothing dropped
    assert any("softmax" in u["kernel"] for u in w.unmapped)
    assert {e["shape"] for e in w.entries if e["op"] == "gemm"} == {"M8-N48-K32"}
    out = tmp_path / "w.json"
    out.write_text(json.dumps(w.to_json()))
    back = load_weights(out)
    ow = back.operator_weights("decode", ["rms_norm", "gemm", "fused_moe"])
    assert ow["fused_moe"] == 0.0 and ow["gemm"] > 0 and ow["rms_norm"] > 0
    assert back.operator_weights("prefill", ["gemm"]) == {"gemm": 0.0}


def test_gpu_kernels_link_to_their_launching_op_by_external_id(tmp_path):
    """The layout torch.profiler writes with CUDA activity (kernel events linked to cpu ops by External id)."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
           "args": {"External id": 7, "Input Dims": [[64, 4096], [4096, 1024]]}},
          {"ph": "X", "cat": "user_annotation", "name": "aka:fused_moe[T=64,H=4096,I=768,E=128,k=8]", "pid": 1,
           "tid": 1, "ts": 20, "dur": 30},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 25, "dur": 5,
           "args": {"External id": 8, "Input Dims": [[64, 4096], [4096, 768]]}},
          {"ph": "X", "cat": "kernel", "name": "nvjet_hsh_128x256", "pid": 0, "tid": 7, "ts": 5, "dur": 40,
           "args": {"External id": 7}},
          {"ph": "X", "cat": "kernel", "name": "nvjet_hsh_64x64", "pid": 0, "tid": 7, "ts": 30, "dur": 20,
           "args": {"External id": 8}},
          {"ph": "X", "cat": "kernel", "name": "flash_fwd_kernel", "pid": 0, "tid": 7, "ts": 60, "dur": 40,
           "args": {"External id": 99}}]
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    w = weights_from_traces([path], load_map(MAP), phase="prefill")
    assert w.device == "gpu" and w.total_us == 100
    by = {(e["op"], e["shape"]): e["weight"] for e in w.entries}
    assert by[("gemm", "M64-N1024-K4096")] == pytest.approx(0.4)
    assert by[("fused_moe", "T64-H4096-I768-E128-k8")] == pytest.approx(0.2)   # the MoE block wins over gemm
    assert by[("unmapped", "unknown")] == pytest.approx(0.4)
    assert w.unmapped[0]["kernel"] == "flash_fwd_kernel"


def test_errors_name_the_file_and_the_fix(tmp_path):
    trace = real_trace(tmp_path / "t.json")
    data = json.loads(trace.read_text())
    del data["aka"]
    trace.write_text(json.dumps(data))
    with pytest.raises(TraceError, match="pass --phase"):
        weights_from_traces([trace], load_map(MAP))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TraceError, match="bad.json"):
        read_trace(tmp_path / "bad.json")
    (tmp_path / "map.yaml").write_text("rules:\n  - op: gemm\n    dims: {aten::mm: {M: 'x[0]'}}\n")
    with pytest.raises(TraceError, match="in0"):
        load_map(tmp_path / "map.yaml")
    (tmp_path / "w.json").write_text("{}")
    with pytest.raises(WeightsFileError, match="not an aka weights file"):
        load_weights(tmp_path / "w.json")
