"""aka e2e on the CPU: shard arithmetic, module swaps by structure, drift that catches a wrong kernel, usage errors.
Tiny models (-m overrides) under Triton's interpreter; the latency half needs a GPU (test_e2e_gpu)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.e2e.models import ModelError, family_of, load_models, shard_config

ROOT = Path(__file__).resolve().parents[2]
TINY_LLAMA = ["-m", "hidden_size=64", "-m", "intermediate_size=128", "-m", "num_hidden_layers=2",
              "-m", "num_attention_heads=4", "-m", "num_key_value_heads=2", "-m", "head_dim=16", "-m", "vocab_size=256"]
TINY_QWEN_MOE = ["-m", "hidden_size=64", "-m", "moe_intermediate_size=32", "-m", "num_hidden_layers=1",
                 "-m", "num_attention_heads=4", "-m", "num_key_value_heads=2", "-m", "head_dim=16",
                 "-m", "vocab_size=128", "-m", "num_experts=8", "-m", "num_experts_per_tok=2"]

# An rms_norm that forgets the weight: correct-looking output, wrong model.
NO_WEIGHT_RMS_NORM = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, y_ptr, H, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rstd).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6):
    T, H = x.shape
    y = torch.empty_like(x)
    _rms_norm_kernel[(T,)](x, y, H, eps, BLOCK_H=triton.next_power_of_2(H))
    return y
'''


def _aka(args, home: Path):
    env = {**os.environ, "AKA_HOME": str(home), "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "agent.cli", "e2e", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_shard_divides_heads_and_intermediate_and_keeps_one_kv_head():
    cfg, full = shard_config(load_models()["llama-3.1-70b"], tp=8, layers=None)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]) == (8, 1, 3584)
    assert full == cfg["num_hidden_layers"] == 80
    cfg16, _ = shard_config(load_models()["llama-3.1-70b"], tp=16, layers=None)
    assert cfg16["num_key_value_heads"] == 1        # 8 KV heads over 16 GPUs: replicated, never 0


def test_a_few_deepseek_layers_keep_one_dense_layer():
    cfg, full = shard_config(load_models()["deepseek-v3"], tp=8, layers=4)
    assert (cfg["num_hidden_layers"], full, cfg["first_k_dense_replace"]) == (4, 61, 1)
    assert cfg["moe_intermediate_size"] == 256 and cfg["num_attention_heads"] == 16
    assert "weight_block_size" not in cfg


@pytest.mark.parametrize("tp,layers,needle", [(0, None, "at least 1"), (3, None, "does not split"),
                                              (1, 0, "must lie in [1, 32]"), (1, 33, "must lie in [1, 32]")])
def test_shard_errors_say_the_value_and_the_limit(tp, layers, needle):
    with pytest.raises(ModelError, match=None) as e:
        shard_config(load_models()["llama-3.1-8b"], tp=tp, layers=layers)
    assert needle in str(e.value)


def test_every_model_in_the_yaml_has_a_family_or_a_clear_error():
    for name in load_models():
        try:
            family_of(name)
        except ModelError as e:
            assert "FAMILIES" in str(e) or "not built by aka e2e yet" in str(e)
    with pytest.raises(ModelError, match="not built by aka e2e yet"):
        family_of("qwen3-next-80b-a3b")             # would otherwise match the qwen3 (MoE) prefix


@pytest.mark.interpreter
def test_seeds_inside_a_tiny_llama_replace_every_module_and_keep_the_logits(tmp_path):
    r = _aka(["--model", "llama-3.1-8b", *TINY_LLAMA, "--json", str(tmp_path / "e2e.json")], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((tmp_path / "e2e.json").read_text())
    # 2 layers: 2 gated MLPs; q,k,v,o per layer + lm_head = 9 linears; 2 norms per layer + the final one = 5
    assert rec["replaced"] == {"AkaGatedMLP": 2, "AkaLinear": 9, "AkaRMSNorm": 5}
    assert rec["drift"]["passed"] and rec["drift"]["top1_agreement"] == 1.0
    assert rec["latency"] == [] and "latency not measured" in rec["notes"][0]
    assert {k["origin"] for k in rec["kernels"].values()} == {"seed"}
    assert list((tmp_path / "e2e").glob("llama-3.1-8b-*.json"))        # kept for aka audit export


@pytest.mark.interpreter
def test_a_kernel_that_ignores_the_norm_weight_fails_the_drift_gate(tmp_path):
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    (kdir / "rms_norm.py").write_text(NO_WEIGHT_RMS_NORM)
    r = _aka(["--model", "llama-3.1-8b", *TINY_LLAMA, "--kernels", str(kdir), "--ops", "rms_norm",
              "--json", str(tmp_path / "e2e.json")], tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    rec = json.loads((tmp_path / "e2e.json").read_text())
    assert not rec["drift"]["passed"] and rec["replaced"] == {"AkaRMSNorm": 5}
    assert rec["kernels"]["rms_norm"]["origin"].endswith("rms_norm.py")


@pytest.mark.interpreter
def test_moe_experts_run_through_fused_moe(tmp_path):
    r = _aka(["--model", "qwen3-30b-a3b", *TINY_QWEN_MOE, "--json", str(tmp_path / "e2e.json")], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((tmp_path / "e2e.json").read_text())
    assert rec["replaced"]["AkaExperts"] == 1 and rec["drift"]["passed"]


@pytest.mark.parametrize("args,needle", [
    (["--model", "no-such-model"], "unknown model 'no-such-model'"),
    (["--model", "llama-3.1-8b", "--phase", "both-ways"], "--phase 'both-ways'"),
    (["--model", "llama-3.1-8b", "--tokens", "10,x"], "--tokens '10,x'"),
    (["--model", "llama-3.1-8b", "--ops", "softmax"], "e2e maps only"),
    (["--model", "llama-3.1-8b", "--layers", "99"], "must lie in [1, 32]"),
    (["--model", "llama-3.1-8b", "--kernels", "nosuchrun"], "no audit database"),
])
def test_usage_errors_exit_2_with_the_value(tmp_path, args, needle):
    r = _aka(args, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr


@pytest.mark.gpu
def test_e2e_gpu_latency_rows_for_both_phases(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    env = {**os.environ, "AKA_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "agent.cli", "e2e", "--model", "llama-3.1-8b", "--layers", "2",
                        "--tokens", "64", "--json", str(tmp_path / "e.json")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    rec = json.loads((tmp_path / "e.json").read_text())
    assert {row["phase"] for row in rec["latency"]} == {"prefill", "decode"}
    assert all(row["stock_us"] > 0 and row["aka_us"] > 0 for row in rec["latency"])
    assert rec["drift"]["passed"], rec["drift"]


@pytest.mark.interpreter
def test_the_accepted_kernel_of_a_run_goes_into_the_model_and_its_verdict_into_the_export(tmp_path):
    """optimize (scripted, tiny shapes) -> e2e --kernels last -> audit export carries E2E.md for that kernel."""
    from test_cli_optimize import invoke, make_app, tiny_shapes
    from test_loop import make_candidates
    cands = make_candidates(tmp_path / "cands")
    home = tmp_path / "home"
    c = ["-c", f"home={home}", "-c", "knowledge.enabled=false", "-c", "sandbox.trials=1"]
    r = invoke(make_app(), "optimize", "--op", "rms_norm", "--shapes", str(tiny_shapes(tmp_path)), "--proposer",
               "scripted", "--script", str(cands["faster.py"]), *c, "-c", "acceptance.untimed=accept-correct")
    assert r.exit_code == 0, r.output
    r = _aka(["--model", "llama-3.1-8b", *TINY_LLAMA, "--kernels", "last", "--ops", "rms_norm"], home)
    assert r.returncode == 0, r.stdout + r.stderr
    (rec_path,) = (home / "e2e").glob("*.json")
    rec = json.loads(rec_path.read_text())
    assert rec["kernels"]["rms_norm"]["origin"].startswith("run rms_norm-")
    r = invoke(make_app(), "audit", "export", "last", "--to", str(tmp_path / "bundle"), *c)
    assert r.exit_code == 0, r.output
    e2e_md = (tmp_path / "bundle" / "E2E.md").read_text()
    assert "| llama-3.1-8b |" in e2e_md and "| yes |" in e2e_md
    assert json.loads((tmp_path / "bundle" / "e2e.json").read_text())[0]["kernels"]["rms_norm"]["sha256"] == \
        rec["kernels"]["rms_norm"]["sha256"]
