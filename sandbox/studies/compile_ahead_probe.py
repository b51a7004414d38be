"""Probe of the compile-ahead pass outside the sandbox, on the GPU: fused_moe hold-out shapes compiled ahead in
forked processes (sandbox/compile_ahead.py), then each shape called for real, in one process.

    python3 sandbox/studies/compile_ahead_probe.py 1 5     # compile ahead, hold-outs drawn with seed 5
    python3 sandbox/studies/compile_ahead_probe.py 0 5     # the same shapes, compiled at their first calls

Prints the pass's summary (specializations, children, seconds) and `ok DIMS` or `FAIL DIMS error` per shape.
As run on the H200 on 2026-12-02 (session 8), when the sandbox's hold-out stage failed with the pass on and
this script, which then ran the pass in the calling process, did not: that told the bug (a kernel already
compiled in the process was launched on meta tensors during the collection) from the mechanism.
"""
import importlib.util
import os
import random
import sys
import tempfile

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.registry import load_operator  # noqa: E402
from sandbox import correctness as cx  # noqa: E402
from sandbox.compile_ahead import compile_ahead, to_meta  # noqa: E402

ahead = sys.argv[1] == "1"
spec = load_operator("fused_moe")
src = Path(spec.seed_path).read_text().replace("BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=2",
                                               "BLOCK_N=64, BLOCK_K=128, num_warps=8, num_stages=2")
path = Path(tempfile.mkdtemp()) / "candidate.py"
path.write_text(src)
mod_spec = importlib.util.spec_from_file_location("cand", path)
mod = importlib.util.module_from_spec(mod_spec)
sys.modules["cand"] = mod
mod_spec.loader.exec_module(mod)
shapes = tuple(s for s in spec.select("hot") if dict(s.dims)["T"] <= 64)[:2]
holds = cx.holdout_shapes(spec, random.Random(int(sys.argv[2])), ["bf16"], at=shapes)
torch.cuda.set_device(0)
torch.zeros(1, device="cuda")
if ahead:
    metas = []
    for h in holds:
        real = spec.make_inputs(h.dim, "bf16", 1, torch.device("cuda", 0))
        metas.append({k: to_meta(v, torch) for k, v in real.items()})
        del real
    print("ahead", compile_ahead(mod.fused_moe, metas), flush=True)
for h in holds:
    inputs = spec.make_inputs(h.dim, "bf16", 2, torch.device("cuda", 0))
    try:
        mod.fused_moe(**inputs)
        torch.cuda.synchronize()
        print("ok", h.dim, flush=True)
    except Exception as e:  # noqa: BLE001 - the probe reports it
        print("FAIL", h.dim, repr(e)[:800], flush=True)
        break
