"""Recovery study: from a correct but badly tuned kernel, does `aka optimize` get back to the tuned seed?

    python -m agent.studies.recovery --op fused_moe --gpu-minutes 5 --samples 4 --out /tmp/recovery-moe
    python -m agent.studies.recovery --op rms_norm --gpu-minutes 5 --samples 4 --out /tmp/recovery-rms

One process does it all (issue 9, item 6):
1. the start: the operator's seed with its worst valid config from a measured table. For fused_moe that
   is the lowest-scoring config of benchmarks/results/moe_search_records/table.json (one flat config,
   set into every bucket and both GEMMs, as the table measured it); for other operators the seed variant
   (agent/studies/seed_variants.py) with the lowest weighted attainment in the H200 table
   benchmarks/results/h200_records/records.json, where that table timed at least MIN_COVERAGE of today's
   hot shapes (silu_and_mul and gemm today), else DEFAULT_BAD; `--bad NAME=VALUE` pairs instead set
   every CONFIGS leaf of that name;
2. the tuned seed, evaluated once here (full gates, CUDA-graph timing): the target;
3. `aka optimize --op OP --shape-set hot --seed-kernel start.py --gpu-minutes G --samples S --baselines
   none`, a real run in a subprocess with its own home (audit trail, runs/) under --out (no PyTorch
   baselines by default: they are the report's comparison, not part of the search, and fused_moe's eager
   one costs a minute of the budget);
4. the run's final kernel and the tuned seed evaluated again here, interleaved (final, tuned, final): the
   ratio compares these full evaluations only (median of the final's two over the tuned seed's two).
It prints a short table last and writes everything to --out (recovery.json, start.py, the run's home).
The claim under test: final weighted attainment >= 95% of the tuned seed's, within the GPU budget.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOE_TABLE = ROOT / "benchmarks" / "results" / "moe_search_records" / "table.json"
VARIANT_TABLE = ROOT / "benchmarks" / "results" / "h200_records" / "records.json"
# for an operator whose table does not cover today's hot shapes (rms_norm's hot set moved to the MLA latent
# norms after the table was measured): one row per program with one warp, far from the tuned table
DEFAULT_BAD = {"rms_norm": {"ROWS": 1, "num_warps": 1}, "silu_and_mul": {"ROWS": 1, "num_warps": 1}}
TARGET_SHARE = 0.95
MIN_COVERAGE = 0.75     # share of today's hot shapes the variant table must have timed


def worst_valid_config(table: dict) -> tuple[dict, float]:
    """The lowest-scoring config of a measured table whose every shape has a finite time."""
    valid = [(row["score"], row["config"]) for row in table["table"].values()
             if row.get("score") is not None and row.get("t_us")
             and all(isinstance(t, (int, float)) and t == t and t > 0 for t in row["t_us"].values())]
    if not valid:
        raise SystemExit("the table holds no valid config (every row has a failed shape)")
    score, config = min(valid, key=lambda sc: sc[0])
    return dict(config), float(score)


def set_everywhere(source: str, values: dict) -> str:
    """The source with every CONFIGS leaf named in `values` set to it (bucket bounds and min_/max_ policy
    keys stay). Raises when a name matches no tunable leaf: the study would start from the seed itself."""
    from agent.proposers.search_space import apply_config, read_configs, set_at
    lit = read_configs(source)
    config, hit = lit.value, set()
    for slot in lit.slots():
        if slot.name in values and slot.rule.kind != "fixed":
            config = set_at(config, slot.path, values[slot.name])
            hit.add(slot.name)
    missing = sorted(set(values) - hit)
    if missing:
        raise SystemExit(f"--bad names {missing} match no tunable CONFIGS leaf of the seed; tunables: "
                         f"{sorted({s.name for s in lit.slots() if s.rule.kind != 'fixed'})}")
    return apply_config(source, config)


def worst_variant(records: list[dict], op: str, hot_ids: set[str]) -> tuple[str, float, float] | None:
    """(name, its weighted attainment, the seed's) of the seed variant the table measured lowest for `op`;
    None when the table has no variant of `op` timed on every shape, or its shapes cover fewer than
    MIN_COVERAGE of `hot_ids` (a table of other shapes says little about how bad the variant is on these)."""
    rows: dict[str, dict[str, dict]] = {}
    for r in records:
        if r.get("op") == op and r.get("kind") in ("seed", "variant"):
            rows.setdefault(r["impl"], {})[r["shape"]] = r
    if not hot_ids or len(hot_ids & set(rows.get("seed", {}))) < MIN_COVERAGE * len(hot_ids):
        return None

    from agent.studies.baseline_report import attainment

    def weighted(by_shape: dict[str, dict]) -> float | None:
        num = den = 0.0
        for r in by_shape.values():
            a = attainment(r) if isinstance(r.get("t_us"), (int, float)) and not r.get("error") else None
            if a is None:
                return None
            num, den = num + r["weight"] * a, den + r["weight"]
        return num / den if den else None

    seed = weighted(rows.get("seed", {}))
    scored = [(weighted(v), name) for name, v in rows.items() if name.startswith("seed:")
              and set(v) == set(rows.get("seed", {}))]
    scored = [(w, name) for w, name in scored if w is not None]
    if seed is None or not scored:
        return None
    w, name = min(scored)
    return name.split(":", 1)[1], w, seed


def apply_variant(source: str, op: str, name: str) -> str:
    """The seed with one of agent/studies/seed_variants.py's variants applied to its CONFIGS literal."""
    from agent.proposers.search_space import apply_config, read_configs
    from agent.studies.seed_variants import VARIANTS, edited
    edits = dict(VARIANTS.get(op, [])).get(name)
    if edits is None:
        raise SystemExit(f"no seed variant {name!r} for {op} in agent/studies/seed_variants.py")
    return apply_config(source, edited(read_configs(source).value, edits))


def start_source(op: str, seed: str, bad: dict | None, hot_ids: set[str] | None = None) -> tuple[str, str]:
    """(source, how it was made); `hot_ids`: the shapes the run scores (default: the operator's hot set)."""
    if bad is None and op == "fused_moe":
        config, score = worst_valid_config(json.loads(MOE_TABLE.read_text()))
        return set_everywhere(seed, config), f"worst valid config of {MOE_TABLE.name} (score {score:.3f}): {config}"
    if bad is None and VARIANT_TABLE.exists():
        if hot_ids is None:
            from benchmarks.registry import load_operator
            hot_ids = {s.id for s in load_operator(op).select("hot")}
        worst = worst_variant(json.loads(VARIANT_TABLE.read_text())["records"], op, hot_ids)
        if worst is not None:
            name, w, seed_w = worst
            return apply_variant(seed, op, name), (f"seed variant {name!r}, the lowest of {VARIANT_TABLE.parent.name}/"
                                                   f"{VARIANT_TABLE.name} (weighted attainment {w:.3f}; the seed "
                                                   f"then {seed_w:.3f})")
    bad = bad or DEFAULT_BAD.get(op)
    if not bad:
        raise SystemExit(f"no default bad config for {op}: pass --bad NAME=VALUE (e.g. --bad num_warps=1)")
    return set_everywhere(seed, bad), f"every {', '.join(f'{k}={v}' for k, v in bad.items())}"


def run_summary(audit_db: Path) -> dict:
    """Iterations, acceptances, scores and GPU time of the one run in an audit trail."""
    from agent.audit import Audit
    with Audit(audit_db) as audit:
        run_id = audit.run_ids()[-1]
        iters = [r.body["record"] for r in audit.records(run_id, "iteration")]
        end = audit.records(run_id, "run_end")
        used = end[-1].body["used"] if end else {}
        return {"run_id": run_id, "iterations": sum(not r["is_seed"] for r in iters),
                "acceptances": sum(bool(r["accepted"]) and not r["is_seed"] for r in iters),
                "start_score": next((r["score"] for r in iters if r["is_seed"]), None),
                "run_end_score": end[-1].body.get("score") if end else None,
                "reason": end[-1].body.get("reason") if end else "no run_end record (killed?)",
                "gpu_s": used.get("gpu_s"), "wall_s": used.get("wall_s")}


def like_for_like_ratio(final: list[float], tuned: list[float]) -> float | None:
    """Median of the final kernel's full evaluations over the median of the tuned seed's (None without both)."""
    if not final or not tuned or not statistics.median(tuned):
        return None
    return statistics.median(final) / statistics.median(tuned)


def _evaluate(op: str, source: str, shapes, hw, settings):
    from agent.acceptance import run_score
    from sandbox import EvalRequest, evaluate
    result = evaluate(EvalRequest(op=op, source=source, shapes=tuple(shapes), hardware=hw, settings=settings))
    return result, run_score(result)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--op", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--gpu-minutes", type=float, default=5.0)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--bad", action="append", default=[], help="NAME=VALUE set in every bucket (repeatable)")
    ap.add_argument("--baselines", default="none", help="the run's --baselines (default none: the claim compares "
                    "the run with the tuned seed, not with PyTorch, so the budget goes to the search)")
    ap.add_argument("-c", dest="overrides", action="append", default=[], help="config override key.path=value for "
                    "the run and for this study's own evaluations (e.g. -c sandbox.compile_ahead=false)")
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="wall limit of the optimize run")
    ap.add_argument("--iterations", type=int, default=None, help="also stop after this many proposals (a CPU "
                    "smoke run needs it: the interpreter spends no GPU time, so --gpu-minutes never ends it)")
    args = ap.parse_args(argv)
    from agent.config import load_config, use_interpreter_if_no_gpu
    interpreter = use_interpreter_if_no_gpu()
    if interpreter and args.iterations is None:
        raise SystemExit("no GPU: the interpreter spends no GPU time, so --gpu-minutes would never end the run; "
                         "pass --iterations N for a smoke run, or run this on the H200")
    from agent.cli import resolve_hardware
    from benchmarks.registry import load_operator

    bad = None
    if args.bad:
        bad = {}
        for pair in args.bad:
            name, _, value = pair.partition("=")
            if not value.lstrip("-").isdigit():
                raise SystemExit(f"--bad {pair!r}: write NAME=INTEGER, e.g. --bad num_warps=1")
            bad[name] = int(value)
    spec = load_operator(args.op)
    seed = Path(spec.seed_path).read_text()
    start, how = start_source(args.op, seed, bad)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "start.py").write_text(start)
    home = args.out / "home"
    cfg = load_config(None, [f"home={home}", *args.overrides])
    hw, _ = resolve_hardware(cfg, None)
    shapes = spec.select("hot")
    t0 = time.monotonic()
    _, tuned_first = _evaluate(args.op, seed, shapes, hw, cfg.sandbox)
    cmd = [sys.executable, "-m", "agent.cli_optimize", "--op", args.op, "--shape-set", "hot", "--seed-kernel",
           str(args.out / "start.py"), "--gpu-minutes", str(args.gpu_minutes), "--samples", str(args.samples),
           "--baselines", args.baselines, "-c", f"home={home}", "-c", "knowledge.enabled=false"]
    for override in args.overrides:
        cmd += ["-c", override]
    if args.iterations is not None:
        cmd += ["--iterations", str(args.iterations)]
    with open(args.out / "optimize.log", "w") as log:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout_s)
    summary = run_summary(cfg.audit_db)
    best = home / "runs" / summary["run_id"] / "best.py"
    # Like against like: only full evaluations made here, interleaved final, tuned, final (the run's own
    # records hold A/B scores too, which read lower in absolute terms and must not be mixed in).
    final_result, final_a = _evaluate(args.op, best.read_text(), shapes, hw, cfg.sandbox)
    tuned_result, tuned_again = _evaluate(args.op, seed, shapes, hw, cfg.sandbox)
    _, final_b = _evaluate(args.op, best.read_text(), shapes, hw, cfg.sandbox)
    tuned = [x for x in (tuned_first, tuned_again) if x is not None]
    final = [x for x in (final_a, final_b) if x is not None]
    ratio = like_for_like_ratio(final, tuned)
    per_shape = [{"id": f.id, "weight": f.weight, "tuned": t.attainment, "final": f.attainment}
                 for f, t in zip(final_result.visible_shapes(), tuned_result.visible_shapes())]
    report = {"op": args.op, "start": how, "interpreter": interpreter, "optimize_exit": proc.returncode,
              "gpu_minutes_budget": args.gpu_minutes, "samples": args.samples, "baselines": args.baselines, **summary,
              "final_remeasured": final, "tuned": tuned, "ratio_final_to_tuned": ratio,
              "reached_95pct": ratio is not None and ratio >= TARGET_SHARE, "per_shape": per_shape,
              "study_wall_s": time.monotonic() - t0}
    (args.out / "recovery.json").write_text(json.dumps(report, indent=2, default=str))
    fmt = lambda x: "-" if x is None else f"{x:.3f}"   # noqa: E731
    print(f"{'op':<14}{'start':>8}{'final':>8}{'tuned':>8}{'ratio':>8}{'iters':>7}{'acc':>5}{'gpu-min':>9}  reached")
    print(f"{args.op:<14}{fmt(summary['start_score']):>8}{fmt(statistics.median(final) if final else None):>8}"
          f"{fmt(statistics.median(tuned) if tuned else None):>8}{fmt(ratio):>8}{summary['iterations']:>7}"
          f"{summary['acceptances']:>5}{fmt((summary['gpu_s'] or 0) / 60):>9}  {report['reached_95pct']}")
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
