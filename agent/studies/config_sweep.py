"""Sweep the tunables of a seed kernel on a GPU, one process, to pick the seed's CONFIGS table.

Development tool: each config is applied by rewriting the seed module's CONFIGS in memory, checked
against the reference once, and timed like the score (CUDA-graph replay, L2 cold, rotated inputs).

    python3 agent/studies/config_sweep.py --op gemm --shapes M256-N7168-K8192,M8192-N7168-K8192
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def gemm_space():
    for bm, bn, bk, w, s, g in itertools.product((64, 128), (64, 128, 256), (64, 128), (4, 8), (3, 4, 5), (8,)):
        if (bm * bk + bk * bn) * 2 * s > 220 * 1024 or (bm == 128 and bn == 256 and w == 4):
            continue
        yield {"buckets": [(1 << 62, dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, num_warps=w, num_stages=s))],
               "min_programs": 0, "min_block": {"BLOCK_M": 16, "BLOCK_N": 16}}


def silu_space():
    for bi, rows, w in itertools.product((256, 512, 1024, 2048, 4096), (1, 2, 4, 8), (1, 2, 4, 8)):
        yield {"max_block_i": bi, "by_block_i": {bi: {"ROWS": rows, "num_warps": w}}}


def rms_space():
    for rows, w in itertools.product((1, 2, 4), (1, 2, 4, 8, 16)):
        yield {"max_block_h": 8192, "by_block_h": {8192: {"ROWS": rows, "num_warps": w}}}


SPACES = {"gemm": gemm_space, "silu_and_mul": silu_space, "rms_norm": rms_space}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", required=True, choices=sorted(SPACES))
    ap.add_argument("--shapes", default="", help="comma-separated shape ids (default: the hot set)")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import torch

    from benchmarks.hardware import load_hardware
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    from sandbox.timing import time_call

    spec = load_operator(args.op)
    s = importlib.util.spec_from_file_location("seed_sweep", spec.seed_path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    fn = getattr(mod, args.op)
    hw = load_hardware("h200")
    wanted = [x for x in args.shapes.split(",") if x]
    shapes = [sh for sh in spec.shapes if sh.id in wanted] if wanted else list(spec.select("hot"))
    results = []
    for shape in shapes:
        sets = [spec.make_inputs(shape.dim, shape.dtype, seed=7 + i, device="cuda") for i in range(3)]
        ref = spec.reference(**sets[0]).float()
        t_roof = roofline(*spec.work(shape), hw).t_roof_s
        rows = []
        t0 = time.time()
        for cfg in SPACES[args.op]():
            mod.CONFIGS = cfg
            try:
                out = fn(**sets[0]).float()
                rel = ((out - ref).norm() / ref.norm()).item()
                if not rel < 2e-2:
                    rows.append({"cfg": cfg, "error": f"rel_l2 {rel:.2e}"})
                    continue
                tr = time_call(lambda d: fn(**d), sets, reps=20, warmup=2)
                rows.append({"cfg": cfg, "t_us": tr.t_s * 1e6, "mode": tr.mode})
            except Exception as e:
                rows.append({"cfg": cfg, "error": f"{type(e).__name__}: {str(e)[:120]}"})
        ok = sorted((r for r in rows if "t_us" in r), key=lambda r: r["t_us"])
        base = getattr(spec.module, "baseline", None)
        t_base = time_call(lambda d: base(**d), sets, reps=20).t_s * 1e6 if base else float("nan")
        print(f"{args.op} {shape.id}: roof {t_roof*1e6:.2f} us, baseline {t_base:.2f} us, "
              f"{len(ok)}/{len(rows)} configs ran in {time.time()-t0:.0f}s")
        for r in ok[: args.top]:
            print(f"   {r['t_us']:9.2f} us  att {min(1, t_roof * 1e6 / r['t_us']):.2f}  {json.dumps(r['cfg'])[:200]}")
        results.append({"shape": shape.id, "t_roof_us": t_roof * 1e6, "rows": rows})
        del sets
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
