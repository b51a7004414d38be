"""A run's seed and its final kernel A/B'd in one worker: the run's before/after per shape, side by side.

    python -m agent.studies.seed_vs_final AKA_HOME [--run RUN_ID] [--rounds 30] --out OUT.json

`aka optimize` ends with a seed-vs-final table from two full evaluations in two fresh processes. On 2 us
decode shapes two processes read one kernel up to 9% apart (benchmarks/results/sandbox_h200.md); in session
9's rms_norm run the shapes the accepted move did not touch moved 8-16% between the two columns. Here both
kernels, taken from the run's audit trail (the seed's and the final incumbent's source), run in one worker,
interleaved over `rounds` rounds on every shape of the run (sandbox/ab.py, the acceptance rule's own
measurement): per shape the median time of each and their ratio, per round the run's score of each, and the
paired sign-flip p-value of the final being faster (agent/acceptance.py). Needs a GPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path


def run_kernels(home: Path, run_id: str | None) -> tuple[str, object, str, str]:
    """(run id, its RunStart record, the seed's source, the final incumbent's source) from HOME/audit.db.
    Default run: the newest that has ended."""
    from agent import records as R
    from agent.audit import Audit
    audit = Audit(home / "audit.db")
    try:
        ended = {r.run_id: r.body for r in audit.records(kind="run_end")}
        ids = [i for i in audit.run_ids() if i in ended]
        if run_id is None:
            if not ids:
                raise SystemExit(f"{home / 'audit.db'}: no run has ended there (runs: {audit.run_ids() or 'none'})")
            run_id = ids[-1]
        if run_id not in ended:
            raise SystemExit(f"run {run_id!r} has no run_end record in {home / 'audit.db'} (ended: {ids or 'none'})")
        start = R.RunStart.from_json(audit.records(run_id=run_id, kind="run_start")[0].body)
        if not start.seed_source_sha256:
            raise SystemExit(f"run {run_id} was written from the reference (--from-reference): it has no seed")
        if not ended[run_id].get("incumbent_sha256"):
            raise SystemExit(f"run {run_id} ended with no incumbent kernel ({ended[run_id].get('reason')})")
        seed = audit.source(start.seed_source_sha256)
        final = audit.source(ended[run_id]["incumbent_sha256"])
    finally:
        audit.close()
    return run_id, start, seed, final


def per_shape(series, shapes, hardware, op: str) -> list[dict]:
    """Per shape: the median per-call time of A (seed) and B (final) over the rounds, B's speed-up and each one's
    attainment at those medians (T_ref as in every evaluation: max(T_roof, the worker's latency floor))."""
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    from benchmarks.scoring import score_shape
    spec = load_operator(op)
    by_id = {s.id: s for s in shapes}
    floor = float(series.floor_s or 0.0)
    rows = []
    for k, shape_id in enumerate(series.shape_ids):
        s = by_id[shape_id]
        t_roof = roofline(*spec.work(s), hardware).t_roof_s
        t_a, t_b = statistics.median(series.a[k]), statistics.median(series.b[k])
        attain = [score_shape(shape_id, s.weight, t, t_roof, floor).attainment for t in (t_a, t_b)]
        rows.append({"id": shape_id, "weight": s.weight, "seed_us": t_a * 1e6, "final_us": t_b * 1e6,
                     "speedup": t_a / t_b, "attain_seed": attain[0], "attain_final": attain[1]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("home", type=Path, help="the run's AKA_HOME (its audit.db)")
    ap.add_argument("--run", default=None, help="run id (default: the newest run that ended)")
    ap.add_argument("--rounds", type=int, default=30, help="interleaved rounds (sandbox.ab_rounds)")
    ap.add_argument("--hardware", default="auto",
                    help="ceilings for T_roof (configs/hardware; datasheet; auto: the GPU it runs on)")
    ap.add_argument("--out", type=Path, required=True, help="JSON to write")
    args = ap.parse_args(argv)
    if args.rounds < 4:
        raise SystemExit(f"--rounds {args.rounds}: the paired test needs at least 4 rounds")
    from agent.acceptance import paired_decision, round_scores
    from benchmarks.hardware import study_hardware
    from benchmarks.spec import Shape
    from sandbox import EvalRequest
    from sandbox.session import Sandbox
    from sandbox.settings import SandboxSettings

    run_id, start, seed, final = run_kernels(args.home, args.run)
    if seed == final:
        print(f"{run_id}: the final kernel is the seed (nothing was accepted); nothing to compare")
        args.out.write_text(json.dumps({"run_id": run_id, "same_kernel": True}, indent=1))
        return 0
    hardware = study_hardware(args.hardware)
    shapes = tuple(Shape.make(**{**s, "dims": dict(s["dims"])}) for s in start.shapes)
    settings = dataclasses.replace(SandboxSettings(), ab_rounds=args.rounds)
    req = EvalRequest(op=start.op, source=seed, shapes=shapes, hardware=hardware, settings=settings,
                      correctness=False)
    with Sandbox(settings) as sb:
        series = sb.measure_ab(req, final)
    if series.error:
        print(f"{run_id}: the A/B did not finish: {series.error}", file=sys.stderr)
        return 1
    a, b = round_scores(series, shapes, hardware, start.op)
    decision = paired_decision(a, b, alpha=0.01)
    rows = per_shape(series, shapes, hardware, start.op)
    out = {"run_id": run_id, "op": start.op, "shape_set": start.shape_set, "hardware": args.hardware,
           "rounds": series.rounds, "floor_us": (series.floor_s or 0.0) * 1e6, "wall_s": series.wall_s,
           "score_seed_median": statistics.median(a), "score_final_median": statistics.median(b),
           "p_final_faster": decision.details.get("p_value"), "mean_ratio": decision.details.get("mean_ratio"),
           "shapes": rows, "stage_times": dict(series.stage_times)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"{run_id}: seed vs final in one worker, {series.rounds} rounds, {args.hardware} ceilings")
    print(f"{'shape':28} {'weight':>7} {'seed us':>9} {'final us':>9} {'speed-up':>8} {'attain':>13}")
    for r in rows:
        print(f"{r['id']:28} {r['weight']:7.3g} {r['seed_us']:9.3g} {r['final_us']:9.3g} {r['speedup']:8.3f} "
              f"{r['attain_seed']:6.3f}>{r['attain_final']:.3f}")
    print(f"weighted attainment (median of rounds): {out['score_seed_median']:.4f} -> {out['score_final_median']:.4f}"
          f" (mean ratio {out['mean_ratio']:.4f}, p = {out['p_final_faster']:.3g} that the final is not faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
