"""Sweep the tunables of a seed kernel on a GPU, one process, to pick the seed's CONFIGS table.

Development tool: each config is applied by rewriting the seed module's CONFIGS in memory, checked
against the reference once, and timed like the score (CUDA-graph replay, L2 cold, rotated inputs).

    python3 agent/studies/config_sweep.py --op gemm --shapes M256-N7168-K8192,M8192-N7168-K8192
    python3 agent/studies/config_sweep.py --op gemm_decode --shapes M64-N7168-K8192 --confirm 5 --rounds 5

--confirm N --rounds R times the N fastest configs of a shape again beside the seed as committed and the
operator's baseline, round-robin R times, and reports each one's median over the rounds: one pass over dozens
of configs is a screen, and at tens of microseconds one config's spread in a run is about the gap it is asked
to decide.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


SMEM_BYTES = 220 * 1024          # the H200's 227 KB a block, less what the compiler keeps for itself


def _gemm_configs(seed_configs: dict, bucket: dict) -> dict:
    """One bucket for every M, with the seed's structural switches at their plain values unless set, its
    stream-K settings kept (they apply only when the bucket says STREAM_K=1), and no narrowing of the tile."""
    plain = dict(GROUP_M=8, SPLIT_K=1, TMA=0, PERSISTENT=0, WARP_SPECIALIZE=0, FLATTEN=0, STREAM_K=0)
    return {**seed_configs, "buckets": [(1 << 62, {**plain, **bucket})], "min_programs": 0,
            "min_block": {"BLOCK_M": 16, "BLOCK_N": 16}}


def gemm_space():
    seed = _seed_module("gemm").CONFIGS
    for bm, bn, bk, w, s, g in itertools.product((64, 128), (64, 128, 256), (64, 128), (4, 8), (3, 4, 5), (8,)):
        if (bm * bk + bk * bn) * 2 * s > SMEM_BYTES or (bm == 128 and bn == 256 and w == 4):
            continue
        yield _gemm_configs(seed, dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, num_warps=w, num_stages=s))


def gemm_decode_space():
    """M <= 64 is a stream of the weight b: tiles one tile row tall, narrow to wide in N, K steps up to 1 KB of
    a b row (DRAM pages), every pipeline depth that fits, pointer and TMA loads; stream-K where the tiles leave
    SMs idle."""
    seed = _seed_module("gemm").CONFIGS
    for bn, bk, s, tma in itertools.product((32, 64, 128), (128, 256, 512), (2, 3, 4, 5, 6), (0, 1)):
        if (64 * bk + bk * bn) * 2 * s > SMEM_BYTES:
            continue
        for w in ((4, 8) if bn == 128 else (4,)):
            for sk in ((0, 1) if bn == 128 else (0,)):
                yield _gemm_configs(seed, dict(BLOCK_M=64, BLOCK_N=bn, BLOCK_K=bk, TMA=tma, STREAM_K=sk,
                                               num_warps=w, num_stages=s))


MOE_DECODE_MAX_ROWS = 24     # fused_moe buckets up to this many rows per expert: the decode shapes (T <= 256)


def _moe_gemm_space(which: str):
    """fused_moe at decode, one grouped GEMM's tile (`which`: gemm1 or gemm2) varied in every decode bucket, the
    other GEMM, BLOCK_M, GROUP_M and the switches as the seed has them: the exhaustive search of
    benchmarks/results/moe_search.md gave both GEMMs one tile, and GEMM 2 (K = I, 192-256) streams its weights in
    a few K steps where GEMM 1 (K = H) takes dozens."""
    import copy
    seed = _seed_module("fused_moe").CONFIGS
    b_tiles = 2 if which == "gemm1" else 1                     # GEMM 1 loads a gate and an up tile a K step
    max_bm = max(e["BLOCK_M"] for bound, e in seed["buckets"] if bound <= MOE_DECODE_MAX_ROWS)
    for bn, bk, w, st in itertools.product((64, 128, 256), (64, 128), (4, 8), (2, 3, 4)):
        if (max_bm * bk + b_tiles * bk * bn) * 2 * st > SMEM_BYTES:
            continue
        cfg = copy.deepcopy(seed)
        tile = dict(BLOCK_N=bn, BLOCK_K=bk, num_warps=w, num_stages=st)
        for bound, entry in cfg["buckets"]:
            if bound <= MOE_DECODE_MAX_ROWS:
                entry[which] = dict(tile)
        cfg["_sweep"] = f"decode {which} {tile}"             # the label; the seed reads only its own keys
        yield cfg


def silu_space():
    for bi, rows, w in itertools.product((256, 512, 1024, 2048, 4096), (1, 2, 4, 8), (1, 2, 4, 8)):
        yield {"max_block_i": bi, "by_block_i": {bi: {"ROWS": rows, "num_warps": w}}}


def rms_space():
    for rows, w in itertools.product((1, 2, 4), (1, 2, 4, 8, 16)):
        yield {"max_block_h": 8192, "by_block_h": {8192: {"ROWS": rows, "num_warps": w}}}


SPACES = {"gemm": gemm_space, "gemm_decode": gemm_decode_space, "silu_and_mul": silu_space, "rms_norm": rms_space,
          "fused_moe_gemm1": lambda: _moe_gemm_space("gemm1"), "fused_moe_gemm2": lambda: _moe_gemm_space("gemm2")}
OPERATOR = {"gemm_decode": "gemm", "fused_moe_gemm1": "fused_moe", "fused_moe_gemm2": "fused_moe"}  # another seed


def _seed_module(op: str):
    from benchmarks.registry import load_operator
    spec = load_operator(op)
    s = importlib.util.spec_from_file_location(f"seed_sweep_{op}", spec.seed_path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def _label(cfg: dict) -> str:
    """A config in a line: what a space says it varied, a gemm space's one bucket, else the whole table."""
    if "_sweep" in cfg:
        return cfg["_sweep"]
    buckets = cfg.get("buckets")
    return json.dumps(buckets[-1][1] if buckets and len(buckets) == 1 else cfg, default=str)[:200]


def confirm(fn, mod, candidates: list[dict], sets: list[dict], base, rounds: int) -> list[dict]:
    """Each candidate config (and the seed as committed, and the baseline) timed once a round, round-robin,
    `rounds` rounds: [{"label", "cfg", "t_us" (median of the rounds), "rounds_us"}], fastest first."""
    from sandbox.timing import time_call
    committed = mod.CONFIGS
    entries = [{"label": "seed", "cfg": committed}] + [{"label": f"#{i + 1}", "cfg": c} for i, c in
                                                        enumerate(candidates)]
    if base is not None:
        entries.append({"label": "baseline", "cfg": None})
    for e in entries:
        e["rounds_us"] = []
    for _ in range(rounds):
        for e in entries:
            if e["cfg"] is None:
                e["rounds_us"].append(time_call(lambda d: base(**d), sets, reps=20).t_s * 1e6)
            else:
                mod.CONFIGS = e["cfg"]
                e["rounds_us"].append(time_call(lambda d: fn(**d), sets, reps=20, warmup=2).t_s * 1e6)
    mod.CONFIGS = committed
    for e in entries:
        e["t_us"] = statistics.median(e["rounds_us"])
    return sorted(entries, key=lambda e: e["t_us"])


def paired_vs_baseline(entry: dict, entries: list[dict]) -> str:
    """'1.031x [1.010, 1.052]': the baseline's time over this entry's in the same round, median and interval
    (agent/studies/baseline_report.median_interval); '' for the baseline itself or without one."""
    from agent.studies.baseline_report import median_interval
    base = next((e for e in entries if e["cfg"] is None), None)
    if base is None or entry is base or len(base["rounds_us"]) != len(entry["rounds_us"]):
        return ""
    ratios = [b / a for a, b in zip(entry["rounds_us"], base["rounds_us"])]
    ci = median_interval(ratios)
    return f"{statistics.median(ratios):.3f}x" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", required=True, choices=sorted(SPACES))
    ap.add_argument("--shapes", default="", help="comma-separated shape ids (default: the hot set)")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--confirm", type=int, default=0, help="time the N fastest again beside the seed and baseline")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --confirm (each candidate once a round)")
    args = ap.parse_args()
    import torch

    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    from sandbox.timing import time_call

    op = OPERATOR.get(args.op, args.op)
    spec = load_operator(op)
    mod = _seed_module(op)
    fn = getattr(mod, op)
    hw = study_hardware()
    wanted = [x for x in args.shapes.split(",") if x]
    shapes = [sh for sh in spec.shapes if sh.id in wanted] if wanted else list(spec.select("hot"))
    results = []
    for shape in shapes:
        sets = [spec.make_inputs(shape.dim, shape.dtype, seed=7 + i, device="cuda") for i in range(3)]
        ref = spec.reference(**sets[0]).float()
        t_roof = roofline(*spec.work(shape), hw).t_roof_s
        rows = []
        t0 = time.time()
        committed = mod.CONFIGS
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
        mod.CONFIGS = committed
        ok = sorted((r for r in rows if "t_us" in r), key=lambda r: r["t_us"])
        base = getattr(spec.module, "baseline", None)
        t_base = time_call(lambda d: base(**d), sets, reps=20).t_s * 1e6 if base else float("nan")
        print(f"{args.op} {shape.id}: roof {t_roof*1e6:.2f} us, baseline {t_base:.2f} us, "
              f"{len(ok)}/{len(rows)} configs ran in {time.time()-t0:.0f}s")
        for r in ok[: args.top]:
            print(f"   {r['t_us']:9.2f} us  att {min(1, t_roof * 1e6 / r['t_us']):.2f}  {_label(r['cfg'])}")
        errors = [r for r in rows if "error" in r]
        if errors:
            print(f"   {len(errors)} configs failed, first: {errors[0]['error']}")
        entry = {"shape": shape.id, "t_roof_us": t_roof * 1e6, "rows": rows}
        if args.confirm and ok:
            entry["confirm"] = confirm(fn, mod, [r["cfg"] for r in ok[: args.confirm]], sets, base, args.rounds)
            print(f"   confirmed, median of {args.rounds} interleaved rounds (vs baseline: its time over this one's, "
                  f"round by round, median and sign-test interval):")
            for e in entry["confirm"]:
                print(f"   {e['label']:>8} {e['t_us']:9.2f} us  {paired_vs_baseline(e, entry['confirm']):28} "
                      f"{'' if e['cfg'] is None else _label(e['cfg'])}")
        results.append(entry)
        del sets
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
