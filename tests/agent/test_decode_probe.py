"""agent/studies/decode_probe.py on the CPU: the dry run checks the seed, its CONFIGS grid and the minimal kernels
under the interpreter; each grid point steers the bucket the seed's launcher uses at the real decode shapes; a
wrong implementation is reported, not timed. (The timing and Inductor's code need the GPU.)"""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from agent.studies import decode_probe as dp
from agent.studies.copy_floor import plan
from agent.studies.seed_variants import edited, load_seed
from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.interpreter
def test_dry_run_checks_every_implementation_of_both_operators(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    # T <= 64: both row widths of each operator (a power of two and not, at interpreter_dims) and T = 1, in half the
    # time of the full hot decode set
    other = tmp_path / "other_seed.py"         # another seed file of rms_norm, timed beside the working one
    other.write_text(Path(load_operator("rms_norm").seed_path).read_text())
    proc = subprocess.run([sys.executable, "-m", "agent.studies.decode_probe", "--out", str(tmp_path), "--dry-run",
                           "--max-t", "64", "--seed-file", f"rms_norm:other={other}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "decode_probe.json").read_text())
    shapes = {(r["op"], r["shape"]) for r in plan(dp.DEFAULT_OPS, 64)}
    assert shapes and {(r["op"], r["shape"]) for r in data["rows"]} == shapes
    for op, shape in shapes:
        rows = [r for r in data["rows"] if (r["op"], r["shape"]) == (op, shape)]
        kinds = {k: [r for r in rows if r["kind"] == k] for k in ("seed", "variant", "minimal")}
        grid = ({f"seed:r{r}w{w}" for r in dp.ROWS for w in dp.WARPS} if op == "rms_norm" else
                {f"seed:b{b}w{w}" for b in dp.SILU_BLOCKS for w in dp.WARPS})
        assert {r["impl"] for r in kinds["variant"]} == grid and len(kinds["variant"]) == len(grid)
        assert len(kinds["minimal"]) == 6                                 # min and min_rt at 1, 2 and 4 warps
        assert sorted(r["impl"] for r in kinds["seed"]) == (["other", "seed"] if op == "rms_norm" else ["seed"])
        for r in kinds["seed"] + kinds["variant"] + kinds["minimal"]:
            assert r["error"] is None and r["rel_l2"] < 1e-5 and r["t_us"] is None, r
    assert data["inductor"] == {} and data["floor_us"] is None and not (tmp_path / "inductor").exists()
    assert "best variant" in proc.stdout


@pytest.mark.parametrize("op", dp.DEFAULT_OPS)
def test_each_grid_point_reaches_the_bucket_the_seed_uses_at_each_decode_shape(op):
    spec = load_operator(op)
    seed = load_seed(spec)
    launch = seed._config if op == "rms_norm" else seed._launch
    for row in plan([op], 256):
        T, width = row["dims"]["T"], row["dims"]["H" if op == "rms_norm" else "I"]
        for name, overrides in dp.variant_grid(op, seed.CONFIGS, row["dims"]):
            saved, seed.CONFIGS = seed.CONFIGS, edited(seed.CONFIGS, overrides)
            try:
                got = launch(T, min(triton.next_power_of_2(width), saved["max_block_h"])) if op == "rms_norm" \
                    else launch(T, width)
            finally:
                seed.CONFIGS = saved
            if op == "rms_norm":
                assert f"r{got['ROWS']}w{got['num_warps']}" == name and got["PERSISTENT"] == 0, (row["shape"], got)
            else:
                assert f"b{got['BLOCK']}w{got['num_warps']}" == name and got["FLAT"] == 1, (row["shape"], got)


@pytest.mark.interpreter
def test_a_wrong_implementation_is_reported_and_not_timed():
    spec = load_operator("rms_norm")
    shape = next(s for s in spec.select("hot") if s.id == "T16-H512")

    def raises(**inputs):
        raise RuntimeError("launch failed")
    impls = [("seed", "seed", load_seed(spec).rms_norm, None),
             ("zeros", "variant", lambda **inputs: torch.zeros_like(inputs["x"]), None),
             ("raises", "minimal", raises, None)]
    recs, dumped = dp.probe_shape(spec, shape, impls, device="cpu", dry_run=True, floor_s=None, inductor_dir=None,
                                  log=io.StringIO())
    by = {r.impl: r for r in recs}
    assert by["seed"].error is None and dumped is None
    assert by["zeros"].error and by["zeros"].rel_l2 == pytest.approx(1.0) and by["zeros"].t_us is None
    assert "RuntimeError: launch failed" in by["raises"].error
    assert any("not timed: zeros" in line for line in dp.summary(recs, dry_run=True))


def test_a_seed_file_item_without_op_name_or_file_says_what_to_give(tmp_path):
    with pytest.raises(SystemExit, match="OP:NAME=PATH"):
        dp.seed_files(["rms_norm=/tmp/x.py"])
    with pytest.raises(SystemExit, match="is not a file"):
        dp.seed_files([f"rms_norm:old={tmp_path / 'missing.py'}"])
