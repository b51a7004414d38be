"""`aka trace` on the CPU with a shrunken Llama (transformers' own modeling code, random weights), then
`aka weights --from-trace` on that trace, then the weights file read by `aka bench --all --weights`."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

SMALL = {"hidden_size": 64, "intermediate_size": 128, "vocab_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16}


def test_trace_a_tiny_llama_then_weights_from_it(tmp_path):
    pytest.importorskip("transformers")
    from agent.cli import app
    from agent.trace_model import trace_model
    trace = tmp_path / "llama-decode.json"
    meta = trace_model("llama-3.1-8b", "decode", 4, trace, layers=2, context=8, overrides=SMALL)
    assert meta["phase"] == "decode" and meta["layers"] == 2
    out = tmp_path / "w.json"
    r = CliRunner().invoke(app, ["weights", "--from-trace", str(trace), "--out", str(out)])
    assert r.exit_code == 0, r.output
    w = json.loads(out.read_text())
    ops = {e["op"] for e in w["entries"]}
    assert {"gemm", "rms_norm", "silu_and_mul", "unmapped"} <= ops, ops
    assert {e["shape"] for e in w["entries"] if e["op"] == "rms_norm"} == {"T4-H64"}
    assert {e["shape"] for e in w["entries"] if e["op"] == "silu_and_mul"} == {"T4-I128"}
    assert sum(e["weight"] for e in w["entries"]) == pytest.approx(1.0)
    assert "unmapped:" in r.output and "attention" in r.output      # the SDPA kernel is named, not dropped


def test_usage_errors(tmp_path):
    from agent.cli import app
    runner = CliRunner()
    r = runner.invoke(app, ["trace", "--model", "gpt-9", "--phase", "decode", "--tokens", "4"])
    assert r.exit_code == 2 and "unknown model 'gpt-9'" in r.output
    r = runner.invoke(app, ["weights", "--from-trace", str(tmp_path / "none.json")])
    assert r.exit_code == 2 and "none.json" in r.output
    (tmp_path / "w.json").write_text("[]")
    r = runner.invoke(app, ["bench", "--all", "--weights", str(tmp_path / "w.json"), "-c", f"home={tmp_path}"])
    assert r.exit_code == 2 and "not an aka weights file" in r.output
