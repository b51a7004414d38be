"""fused_moe: the `search` proposer against an exhaustive search and random search of one config space.

The space is vLLM's fused-MoE tuning space (BLOCK_M x BLOCK_N x BLOCK_K x GROUP_M x num_warps x
num_stages), one config shared by both grouped GEMMs and every batch bucket, as vLLM's tuned config
files do per batch size. Every config of the grid is compiled (in parallel processes) and timed on
the hot shapes like the score (CUDA-graph replay, L2 cold, rotated inputs); a config's score is the
weight-averaged attainment over those shapes. Then the search proposer and random search are replayed
against that measured table, with the same evaluation budgets: the table is real measurements, and a
replay lets every strategy see exactly the same numbers.

    python3 agent/studies/moe_search_study.py --out benchmarks/results/moe_search.md [--shapes 8]

With --table FILE the measurement is skipped and the replays run on a saved table (no GPU needed).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import importlib.util
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

GRID = {"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [64, 128, 256], "BLOCK_K": [64, 128], "GROUP_M": [1, 16],
        "num_warps": [4, 8], "num_stages": [2, 3, 4]}
START = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": 4}


def study_source() -> str:
    """The seed with one flat, vLLM-style config for every bucket and both GEMMs (and its grid declared)."""
    src = (ROOT / "benchmarks/operators/fused_moe/seed.py").read_text()
    flat = ("CONFIGS = " + json.dumps(START) + "\nSEARCH_SPACE = " + json.dumps(GRID) + "\n\n\n"
            "def _pick_config(T: int, E: int, k: int) -> dict:\n"
            "    c = CONFIGS\n"
            "    g = dict(BLOCK_N=c['BLOCK_N'], BLOCK_K=c['BLOCK_K'], num_warps=c['num_warps'], num_stages=c['num_stages'])\n"
            "    return dict(BLOCK_M=c['BLOCK_M'], GROUP_M=c['GROUP_M'], gemm1=dict(g), gemm2=dict(g))\n")
    src = re.sub(r"\nCONFIGS = \{.*?\n\}\n", "\n" + _SEED_EXTRAS + "\n", src, flags=re.S)
    src = re.sub(r"\ndef _pick_config\(.*?\n\n\n", "\n" + flat + "\n\n", src, flags=re.S)
    return src


# The non-tile settings of the seed's CONFIGS that its launcher still reads.
_SEED_EXTRAS = ('_EXTRAS = {"gemm1_min_programs": 0, "align_single_program_max_pairs": 1024, "align_chunk": 1024,\n'
                '           "align_max_tile": 16384, "align_warps": 4, "align_offsets_warps": 16,\n'
                '           "reduce": dict(BLOCK_H=1024, num_warps=4)}')


def _load(src: str, name: str):
    path = Path(tempfile.mkdtemp(prefix="moe_study_")) / f"{name}.py"
    path.write_text(src.replace('CONFIGS["gemm1_min_programs"]', '_EXTRAS["gemm1_min_programs"]')
                    .replace('CONFIGS["align', '_EXTRAS["align').replace('CONFIGS["reduce"]', '_EXTRAS["reduce"]'))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _warm(args) -> str:
    """In a worker process: compile one config for every model's dims (fills triton's disk cache)."""
    src, config, dims_list = args
    try:
        import torch
        from agent.proposers.search_space import apply_config
        from benchmarks.registry import load_operator
        spec = load_operator("fused_moe")
        mod = _load(apply_config(src, config), f"warm_{os.getpid()}_{abs(hash(json.dumps(config)))}")
        for dims in dims_list:
            inputs = spec.make_inputs(dims, "bf16", seed=1, device="cuda")
            mod.fused_moe(**inputs)
        torch.cuda.synchronize()
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:200]}"


def measure_table(src, configs, shapes, hw, workers, deadline: float, save, table: dict | None = None):
    import torch
    from agent.proposers.search_space import apply_config, config_key
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    from sandbox.timing import measure_floor, time_call
    spec = load_operator("fused_moe")
    small = [{**s.dim, "T": 16} for s in shapes]
    table = dict(table or {})            # configs measured earlier (--resume-table) are kept, not re-timed
    configs = [c for c in configs if config_key(c) not in table]
    t0 = time.time()
    ctx = __import__("multiprocessing").get_context("spawn")
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        errors = list(pool.map(_warm, [(src, c, small) for c in configs]))
    print(f"compiled {len(configs)} configs in {time.time() - t0:.0f} s with {workers} processes", flush=True)
    floor = measure_floor()
    sets = {s.id: [spec.make_inputs(s.dim, s.dtype, seed=20 + i, device="cuda") for i in range(2)] for s in shapes}
    refs = {s.id: spec.reference(**sets[s.id][0]).float() for s in shapes}
    t_ref = {s.id: max(roofline(*spec.work(s), hw).t_roof_s, floor) for s in shapes}
    wsum = sum(s.weight for s in shapes)
    t0 = time.time()
    for i, (config, err) in enumerate(zip(configs, errors)):
        key = config_key(config)
        if time.time() > deadline:
            print(f"  --max-minutes reached: {i} of {len(configs)} configs timed; the rest are left out", flush=True)
            break
        if err:
            table[key] = {"config": config, "score": None, "error": err}
            continue
        mod = _load(apply_config(src, config), f"cfg{i}")
        per = {}
        try:
            for s in shapes:
                out = mod.fused_moe(**sets[s.id][0]).float()
                rel = ((out - refs[s.id]).norm() / refs[s.id].norm()).item()
                if not rel < 1e-2:
                    raise ValueError(f"rel_l2 {rel:.2e} on {s.id}")
                tr = time_call(lambda d: mod.fused_moe(**d), sets[s.id], reps=10, warmup=2)
                per[s.id] = tr.t_s
            score = sum(s.weight * min(1.0, t_ref[s.id] / per[s.id]) for s in shapes) / wsum
            table[key] = {"config": config, "score": score, "t_us": {k: v * 1e6 for k, v in per.items()}}
        except Exception as e:
            table[key] = {"config": config, "score": None, "error": f"{type(e).__name__}: {str(e)[:200]}"}
        if i % 16 == 0:
            print(f"  timed {i + 1}/{len(configs)} ({time.time() - t0:.0f} s)", flush=True)
            save(table, floor)
    return table, floor


def per_shape_table(table, shape, floor_s):
    """The table scored on one shape: attainment min(1, T_ref / t) with T_ref = max(roofline, floor)."""
    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    t_ref_us = max(roofline(*load_operator("fused_moe").work(shape), study_hardware()).t_roof_s, floor_s) * 1e6
    out = {}
    for key, v in table.items():
        t = (v.get("t_us") or {}).get(shape.id) if v["score"] is not None else None
        out[key] = {"config": v["config"], "score": min(1.0, t_ref_us / t) if t else None}
    return out


def replay_search(src, table, shapes, budget, seed):
    """The search proposer, driven through its protocol against the measured table."""
    from agent.proposers.search import SearchProposer
    from agent.proposers.search_prefetch import CompileCheck
    from agent.proposers.search_space import config_key, read_configs
    from agent.types import OperatorContract, ProposalContext
    from sandbox.verdict import EvalResult, ShapeResult
    contract = OperatorContract("fused_moe", "", "", (), {}, tuple({"id": s.id} for s in shapes))
    prop = SearchProposer(seed=seed, compile_fn=lambda source, op: CompileCheck(True))
    start_key = config_key(read_configs(src).value)
    inc_src, inc = src, table[start_key]["score"]

    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    spec, hw = load_operator("fused_moe"), study_hardware()
    bounds = {s.id: roofline(*spec.work(s), hw).bound for s in shapes}   # what the sandbox would report

    def result(score):
        rows = [ShapeResult(id=s.id, dims=s.dim, dtype="bf16", weight=s.weight, bound=bounds[s.id]) for s in shapes]
        return EvalResult(op="fused_moe", verdict="accepted" if score is not None else "rejected", shapes=rows,
                          weighted_attainment=score)

    best, trace = inc, [inc]
    for it in range(1, budget):
        ctx = ProposalContext(contract, inc_src, inc, "", result(inc).to_json(), iteration=it, seed=seed)
        p = prop.propose(ctx)
        if p.source is None:
            break
        entry = table.get(config_key(read_configs(p.source).value))
        score = entry["score"] if entry else None
        accepted = score is not None and score > inc
        prop.observe(p, result(score), accepted)
        if accepted:
            inc_src, inc = p.source, score
        best = max(best, score or 0.0)
        trace.append(best)
    prop.close()
    return trace


def replay_random(table, budget, seed, start_score):
    rng = random.Random(seed)
    keys = rng.sample(sorted(table), min(budget - 1, len(table)))
    best, trace = start_score, [start_score]
    for k in keys:
        best = max(best, table[k]["score"] or 0.0)
        trace.append(best)
    return trace


def _env() -> dict:
    import torch
    import triton
    env = {"torch": torch.__version__, "triton": triton.__version__, "date": datetime.date.today().isoformat()}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        try:
            import pynvml
            pynvml.nvmlInit()
            env["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception as e:    # the driver version is context, not a result
            env["driver"] = f"unknown ({type(e).__name__})"
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shapes", type=int, default=8, help="the N heaviest hot shapes")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--max-minutes", type=float, default=6.0, help="stop timing configs after this long")
    ap.add_argument("--table", type=Path, help="replay on this saved table.json instead of measuring")
    ap.add_argument("--resume-table", type=Path, help="measure only the configs this saved table.json lacks")
    ap.add_argument("--seeds", type=int, default=20, help="replays of search and random")
    args = ap.parse_args()
    from agent.proposers.search_space import config_key, enumerate_space, read_configs
    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator
    spec = load_operator("fused_moe")
    shapes = sorted(spec.select("hot"), key=lambda s: -s.weight)[: args.shapes]
    src = study_source()
    configs = enumerate_space(src)
    work = args.out.parent / (args.out.stem + "_records")
    work.mkdir(parents=True, exist_ok=True)

    def save(table, floor):
        (work / "table.json").write_text(json.dumps({"floor_s": floor, "shapes": [s.id for s in shapes],
                                                     "env": _env(), "table": table}, indent=1, default=str))
    if args.table:
        saved = json.loads(args.table.read_text())
        table, floor, env = saved["table"], saved["floor_s"], saved.get("env", {})
        shapes = [s for s in spec.select("hot") if s.id in saved["shapes"]]
        configs = [v["config"] for v in table.values()]
    else:
        deadline = time.time() + args.max_minutes * 60
        earlier = json.loads(args.resume_table.read_text())["table"] if args.resume_table else None
        table, floor = measure_table(src, configs, shapes, study_hardware(), args.workers, deadline, save,
                                     earlier)
        save(table, floor)
        env = _env()
    valid = {k: v for k, v in table.items() if v["score"] is not None}
    best_key = max(valid, key=lambda k: valid[k]["score"])
    best = valid[best_key]["score"]
    budget = max(2, len(configs) // 10)
    start = table[config_key(read_configs(src).value)]["score"] or 0.0
    searches = [replay_search(src, table, shapes, budget, seed) for seed in range(args.seeds)]
    randoms = [replay_random(table, budget, seed, start) for seed in range(args.seeds)]
    s_final = [t[-1] / best for t in searches]
    r_final = [t[-1] / best for t in randoms]
    lines = [f"# fused_moe: search vs exhaustive vs random ({datetime.date.today().isoformat()})", "",
             (f"Command: `python3 agent/studies/moe_search_study.py --out {args.out} --table {args.table}` "
              f"(replays on a table measured earlier; no GPU)" if args.table else
              f"Command: `python3 agent/studies/moe_search_study.py --out {args.out} --shapes {args.shapes}`"), "",
             f"GPU {env.get('gpu')}, driver {env.get('driver')}, torch {env.get('torch')}, triton {env.get('triton')}; "
             f"floor {floor * 1e6:.2f} us; datasheet ceilings (h200).", "",
             f"Space: {' x '.join(f'{k} {v}' for k, v in GRID.items())} = {len(configs)} configs "
             f"({len(valid)} compiled, ran and passed the reference check).",
             f"Shapes (weights renormalized): {', '.join(s.id for s in shapes)}.",
             f"Score: weight-averaged attainment over those shapes. Seed-like start config {START}: {start:.3f}.", "",
             f"Exhaustive best: {best:.3f} with {valid[best_key]['config']} ({len(configs)} evaluations).", "",
             f"Budget for search and random: {budget} evaluations (10% of the space, the start included); "
             f"{args.seeds} replays each (search seeds 0..{args.seeds - 1}).", "",
             "| strategy | median of best / exhaustive best | worst | best | replays reaching >= 0.98 |",
             "|---|---|---|---|---|",
             f"| search | {statistics.median(s_final):.3f} | {min(s_final):.3f} | {max(s_final):.3f} | "
             f"{sum(x >= 0.98 for x in s_final)}/{len(s_final)} |",
             f"| random | {statistics.median(r_final):.3f} | {min(r_final):.3f} | {max(r_final):.3f} | "
             f"{sum(x >= 0.98 for x in r_final)}/{len(r_final)} |", "",
             "Median best-so-far / exhaustive best by evaluation count:", "",
             "| evaluations | search | random |", "|---|---|---|"]
    for n in sorted({1, 2, 4, 8, budget // 2, budget}):
        s = statistics.median(t[min(n, len(t)) - 1] / best for t in searches)
        r = statistics.median(t[min(n, len(t)) - 1] / best for t in randoms)
        lines.append(f"| {n} | {s:.3f} | {r:.3f} |")
    lines += ["", "## Each hot shape's own landscape", "",
              "The same measurements scored per shape (attainment on that shape alone: what tuning one batch-size "
              "bucket sees, as vLLM's per-M config files do). Same budget, same replays.", "",
              "| shape | exhaustive best | search median | search worst | random median | random worst | "
              "search / random >= 0.98 |", "|---|---|---|---|---|---|---|"]
    for shape in shapes:
        one = per_shape_table(table, shape, floor)
        top1 = max(v["score"] for v in one.values() if v["score"] is not None)
        first = one[config_key(read_configs(src).value)]["score"] or 0.0
        ss = [t[-1] / top1 for t in (replay_search(src, one, [shape], budget, seed) for seed in range(args.seeds))]
        rr = [t[-1] / top1 for t in (replay_random(one, budget, seed, first) for seed in range(args.seeds))]
        lines.append(f"| {shape.id} | {top1:.3f} | {statistics.median(ss):.3f} | {min(ss):.3f} | "
                     f"{statistics.median(rr):.3f} | {min(rr):.3f} | {sum(x >= 0.98 for x in ss)}/{len(ss)} vs "
                     f"{sum(x >= 0.98 for x in rr)}/{len(rr)} |")
    top = sorted(valid.values(), key=lambda v: -v["score"])[:5]
    lines += ["", "Top configs:", ""] + [f"- {v['score']:.3f} {v['config']} "
                                         f"{ {k: round(t, 1) for k, t in v['t_us'].items()} }" for v in top]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
