"""gemm at small M: the seed as committed beside stream-K tile choices and cuBLAS, in one process on one GPU.

Development study for the seed's STREAM_K switch (benchmarks/operators/gemm/seed.py). Each variant rewrites
the seed's CONFIGS in memory: the bucket of the shape's M takes the variant's values. Per shape and
variant: one check against the reference, a determinism check (REPEATS calls give the same bits: stream-K's
fix-up adds parts in a fixed order, so a race in its flags shows here as a changed output or NaN), then the
score's timer (CUDA-graph replay, L2 flushed, inputs rotated). Times in us; the last column is cuBLAS over
the fastest variant (above 1.0 ours is faster).

    python3 agent/studies/gemm_stream_k.py --out $OUT/gemm_stream_k.json
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DEFAULT_SHAPES = ("M256-N7168-K8192,M64-N7168-K8192,M16-N7168-K8192,M1-N7168-K8192,M256-N28672-K4096,"
                  "M256-N1536-K7168,M256-N128-K4096,M64-N28672-K4096,M64-N1280-K8192,M256-N4096-K1024")
_TMA = dict(TMA=1, PERSISTENT=0, SPLIT_K=1)
# stream-K at any tile count, on the variant's own tile (no bucket stream_k_tile): how calls 1-4 ran them, before
# the seed took stream-K only where tiles are few (stream_k_max_tile_share)
_FORCED = dict(share=1e9, stream_k_tile={})
VARIANTS = {
    "committed": {},
    "no_stream_k": dict(STREAM_K=0),                # one tile a program (narrowed to fill the GPU), as before
    "sk_forced": dict(STREAM_K=1, share=1e9),       # stream-K whatever the tile count, the seed's stream-K tile
    "sk": dict(STREAM_K=1, **_FORCED),
    "sk_128x128_s5": dict(STREAM_K=1, **_FORCED, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=5, **_TMA),
    "sk_128x256_w8_s3": dict(STREAM_K=1, **_FORCED, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3, **_TMA),
    "sk_64x128_s5": dict(STREAM_K=1, **_FORCED, BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=5, **_TMA),
    "sk_64x256_w4_s4": dict(STREAM_K=1, **_FORCED, BLOCK_M=64, BLOCK_N=256, BLOCK_K=64, num_warps=4, num_stages=4, **_TMA),
    "sk_16x64x256": dict(STREAM_K=1, **_FORCED, BLOCK_M=16, BLOCK_N=64, BLOCK_K=256, num_warps=4, num_stages=4, TMA=0),
    # M = 256 in one tile row: with two 128-row tile rows, stream-K's programs reach a column's two tiles at
    # different K and b was read twice from DRAM (call 1: 60.7 us against 52.1 with one tile a program)
    "sk_256x128_w8_s4": dict(STREAM_K=1, **_FORCED, BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4, **_TMA),
    "sk_256x128_w8_s3": dict(STREAM_K=1, **_FORCED, BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3, **_TMA),
    "sk_256x64_w8_s5": dict(STREAM_K=1, **_FORCED, BLOCK_M=256, BLOCK_N=64, BLOCK_K=64, num_warps=8, num_stages=5, **_TMA),
    "sk_256x64_w4_s5": dict(STREAM_K=1, **_FORCED, BLOCK_M=256, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=5, **_TMA),
    "tiles_256x64_w8_s5": dict(STREAM_K=0, BLOCK_M=256, BLOCK_N=64, BLOCK_K=64, num_warps=8, num_stages=5, **_TMA),
    # (call 3, after tile rows got their own programs and the parts went out through TMA)
    "sk_128x128_s4": dict(STREAM_K=1, **_FORCED, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4, **_TMA),
    "sk_112": dict(STREAM_K=1, **_FORCED, sms=112),            # as many programs as M256-N7168's 128 x 128 tiles: no parts
    "sk_120": dict(STREAM_K=1, **_FORCED, sms=120),
    "sk_128": dict(STREAM_K=1, **_FORCED, sms=128),
    "sk_64x128_s4": dict(STREAM_K=1, **_FORCED, BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4, **_TMA),
    "sk_64x64x128_tma": dict(STREAM_K=1, **_FORCED, BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4, **_TMA),
}
REPEATS = 20


def _load_seed(path: Path):
    spec = importlib.util.spec_from_file_location("gemm_seed_sk", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _apply(mod, committed: dict, values: dict, M: int, sm_count) -> None:
    """The variant's values into the bucket of M; `sms` (not a CONFIGS key) stands in for the SM count, so
    stream-K's overhead can be timed with as many programs as the committed kernel has tiles; `share` sets
    stream_k_max_tile_share."""
    cfg = copy.deepcopy(committed)
    values = dict(values)
    sms = values.pop("sms", None)
    if "share" in values:
        cfg["stream_k_max_tile_share"] = values.pop("share")
    mod._sm_count = (lambda t: sms) if sms else sm_count
    for bound, entry in cfg["buckets"]:
        if M <= bound:
            entry.update(values)
            break
    mod.CONFIGS = cfg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON records")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help="comma-separated gemm shape ids; the item stream_k: every shape the seed sends to stream-K")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--once", action="store_true",
                    help="call each variant once per shape, no timing: for a profiler (ncu) wrapped around this")
    args = ap.parse_args(argv)
    import torch

    from benchmarks.registry import load_operator
    from sandbox.timing import time_call

    spec = load_operator("gemm")
    mod = _load_seed(spec.seed_path)
    committed = copy.deepcopy(mod.CONFIGS)
    sm_count = mod._sm_count
    by_id = {sh.id: sh for sh in spec.shapes}
    if "stream_k" in args.shapes.split(","):     # every shape of shapes.yaml the committed rule sends to stream-K
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        taken = ",".join(sh.id for sh in spec.shapes
                         if mod._stream_k_config(sh.dim["M"], sh.dim["N"], sh.dim["K"], sms) is not None)
        args.shapes = ",".join(taken if s == "stream_k" else s for s in args.shapes.split(","))
    unknown = [s for s in args.shapes.split(",") if s not in by_id]
    if unknown:
        raise SystemExit(f"unknown gemm shapes {unknown}; ids are in benchmarks/operators/gemm/shapes.yaml")
    names = args.variants.split(",")
    if [n for n in names if n not in VARIANTS]:
        raise SystemExit(f"unknown variants {[n for n in names if n not in VARIANTS]}; known: {', '.join(VARIANTS)}")
    records, t0 = [], time.time()
    for sid in args.shapes.split(","):
        shape = by_id[sid]
        sets = [spec.make_inputs(shape.dim, shape.dtype, seed=7 + i, device="cuda") for i in range(4)]
        ref = spec.reference(**sets[0])
        tol = spec.tolerance(shape.dtype)
        row = {"shape": sid, "us": {}, "errors": {}}
        for name in names:
            _apply(mod, committed, VARIANTS[name], shape.dim["M"], sm_count)
            try:
                first = mod.gemm(**sets[0])
                if args.once:
                    torch.cuda.synchronize()
                    continue
                rel = ((first.double() - ref.double()).norm() / ref.double().norm()).item()
                if not rel <= tol.rel_l2:
                    raise AssertionError(f"rel_l2 {rel:.2e} > {tol.rel_l2}")
                for _ in range(REPEATS):
                    again = mod.gemm(**sets[0])
                    if not torch.equal(again, first):
                        raise AssertionError("output changed between identical calls (a race in the fix-up?)")
                row["us"][name] = time_call(lambda d: mod.gemm(**d), sets, reps=30, warmup=3, eager=False).t_s * 1e6
            except Exception as exc:            # one failing variant must not lose the others' times
                row["errors"][name] = f"{type(exc).__name__}: {str(exc)[:200]}"
        mod.CONFIGS, mod._sm_count = committed, sm_count
        if args.once:
            continue
        row["us"]["cublas"] = time_call(lambda d: spec.module.baseline(**d), sets, reps=30, warmup=3,
                                        eager=False).t_s * 1e6
        records.append(row)
        args.out.write_text(json.dumps({"records": records}, indent=1))     # kept after every shape
        del sets
        torch.cuda.empty_cache()
    print(f"{len(records)} shapes in {time.time() - t0:.0f} s ({torch.cuda.get_device_name()}, "
          f"torch {torch.__version__})")
    cols = names + ["cublas"]
    print("| shape | " + " | ".join(cols) + " | cublas / fastest |")
    for r in records:
        ours = [r["us"][n] for n in names if n in r["us"]]
        best = min(ours) if ours else float("nan")
        cells = [f"{r['us'][c]:.2f}" if c in r["us"] else "fail" for c in cols]
        print(f"| {r['shape']} | " + " | ".join(cells) + f" | {r['us']['cublas'] / best:.2f} |")
    for r in records:
        for n, e in r["errors"].items():
            print(f"{r['shape']} {n}: {e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
