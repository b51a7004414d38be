"""Quick in-process probe of the seed kernels on a GPU: correctness, CUDA-graph time, baselines.

For kernel development only (fast feedback, one process, no sandbox): the numbers reported in
benchmarks/results/ come from measure_seeds.py, which goes through the sandbox.

    python3 agent/studies/seed_probe.py [--ops gemm,fused_moe] [--no-compile] [--json out.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def load_seed(spec):
    s = importlib.util.spec_from_file_location(f"seed_{spec.name}", spec.seed_path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return getattr(mod, spec.name)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--shape-set", default="hot")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import torch

    from benchmarks.hardware import study_hardware
    from benchmarks.registry import list_operators, load_operator
    from benchmarks.roofline import roofline
    from sandbox.timing import measure_floor, time_call

    torch.backends.cuda.matmul.allow_tf32 = False
    hw = study_hardware()
    floor = measure_floor()
    print(f"floor {floor * 1e6:.2f} us; GPU {torch.cuda.get_device_name()}", flush=True)
    rows = []
    for op in [o for o in args.ops.split(",") if o] or list_operators():
        spec = load_operator(op)
        fn = load_seed(spec)
        base = getattr(spec.module, "baseline", spec.reference)
        compiled = None if args.no_compile else torch.compile(base, dynamic=False)
        for shape in spec.select(args.shape_set):
            sets = [spec.make_inputs(shape.dim, shape.dtype, seed=100 + i, device="cuda") for i in range(3)]
            ref = spec.reference(**sets[0])
            out = fn(**sets[0])
            torch.cuda.synchronize()
            rel = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
            W, Q = spec.work(shape)
            r = roofline(W, Q, hw)
            t_ref = max(r.t_roof_s, floor)
            res = {"op": op, "shape": shape.id, "rel_l2": rel, "t_roof_us": r.t_roof_s * 1e6, "bound": r.bound}
            for name, f in (("seed", fn), ("eager", base), ("compile", compiled)):
                if f is None:
                    continue
                t0 = time.time()
                try:
                    tr = time_call(lambda d, f=f: f(**d), sets, reps=30)
                    res[name] = {"t_us": tr.t_s * 1e6, "mode": tr.mode, "eager_us": tr.t_eager_s * 1e6,
                                 "spread": tr.spread, "err": tr.graph_error}
                except Exception as e:  # report and go on: this is a probe
                    res[name] = {"t_us": None, "error": f"{type(e).__name__}: {e}"[:300]}
                res[name]["wall_s"] = time.time() - t0
            s = res["seed"].get("t_us")
            res["attain"] = min(1.0, t_ref * 1e6 / s) if s else None
            rows.append(res)
            e = res.get("eager", {}).get("t_us")
            c = res.get("compile", {}).get("t_us") if "compile" in res else None
            print(f"{op:13s} {shape.id:28s} rel {rel:.1e} roof {r.t_roof_s*1e6:8.2f} seed {s or 0:9.2f} "
                  f"({res['seed'].get('mode')}) att {res['attain'] or 0:.2f} eager {e or 0:9.2f} "
                  f"({res.get('eager', {}).get('mode')}) compile {c or 0:9.2f}", flush=True)
            del sets
            torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
