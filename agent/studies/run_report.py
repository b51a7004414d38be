"""What one `aka optimize` run spent, from its audit trail: evaluations per GPU-minute, the wall time of
each stage of a candidate's evaluation, and every iteration's verdict.

    python -m agent.studies.run_report AUDIT_DB [--run RUN_ID_PREFIX] [--json OUT.json]

Issue 9 asks for at least 10 candidate evaluations per GPU-minute; this reads the number from the records
(a candidate counts once, whether the timing-first screen stopped it or it had the full evaluation too)
the loop wrote (each evaluation's `gpu_s` and its EvalResult's `stage_times`), so the claim rests on the
same trail a reviewer audits. Prints a short table last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

# a candidate judged: its full evaluation, or its timing-only one when the timing-first screen stopped it
CANDIDATE_ROLES = ("candidate", "screen")


def summarize(evaluations: list[dict], iterations: list[dict], used: dict | None) -> dict:
    """Pure: evaluation bodies and iteration records of one run -> the report's numbers."""
    by_role: dict[str, list[float]] = {}
    for e in evaluations:
        by_role.setdefault(e["role"], []).append(float(e.get("gpu_s") or 0.0))
    cands = [e for e in evaluations if e["role"] in CANDIDATE_ROLES]
    cand_gpu = sum(float(e.get("gpu_s") or 0.0) for e in cands)
    total_gpu = float((used or {}).get("gpu_s") or sum(sum(v) for v in by_role.values()))
    n = len(cands)
    judged = len({(e["iteration"], e.get("source_sha256")) for e in cands})
    verdicts: dict[str, int] = {}
    for r in iterations:
        if r.get("is_seed"):
            continue
        stage = r.get("failed_stage")
        key = r.get("verdict") if r.get("accepted") or not stage else f"{r['verdict']}@{stage}"
        verdicts[key] = verdicts.get(key, 0) + 1
    return {
        "evaluations_by_role": {k: {"n": len(v), "gpu_s": round(sum(v), 2),
                                    "median_s": round(statistics.median(v), 2)} for k, v in by_role.items()},
        "candidate_evaluations": n,
        "candidates": judged,
        "candidate_median_s": round(statistics.median(e["gpu_s"] for e in cands), 2) if n else None,
        "candidate_median_wall_s": round(statistics.median(e.get("wall_s") or 0.0 for e in cands), 2) if n else None,
        "candidates_per_candidate_gpu_minute": round(60 * judged / cand_gpu, 2) if cand_gpu else None,
        "candidates_per_gpu_minute_whole_run": round(60 * judged / total_gpu, 2) if total_gpu else None,
        # gates and acceptance included (A/B, confirmations, the incumbent's timing-only runs): all but the
        # run's one-time start, the seed's evaluation and the baselines timed once per run
        "candidates_per_gpu_minute_after_start": round(60 * judged / after, 2) if (after := total_gpu - sum(
            sum(v) for k, v in by_role.items() if k == "seed" or k.startswith("baseline:"))) > 0 else None,
        "gpu_s_total": round(total_gpu, 1),
        "iterations": sum(not r.get("is_seed") for r in iterations),
        "accepted": sum(bool(r.get("accepted")) and not r.get("is_seed") for r in iterations),
        "verdicts": verdicts,
        "score_start": next((r.get("score") for r in iterations if r.get("is_seed")), None),
        "stage_median_s": {role: stage_medians([e for e in evaluations if e["role"] == role])
                           for role in CANDIDATE_ROLES},
    }


def stage_medians(evaluations: list[dict]) -> dict[str, float]:
    """Median seconds of each stage over these evaluations (a stage one of them lacks counts 0 there)."""
    stages: dict[str, list[float]] = {}
    for e in evaluations:
        for name, s in (e.get("result") or {}).get("stage_times") or []:
            stages.setdefault(name, []).append(float(s))
    n = len(evaluations)
    out = {k: statistics.median(v + [0.0] * (n - len(v))) for k, v in stages.items()}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def compact_records(evaluations: list[dict], iterations: list[dict]) -> dict:
    """The run's evaluations and iterations without the bulky result bodies (for benchmarks/results/)."""
    evs = [{"iteration": e["iteration"], "role": e["role"], "verdict": (e.get("result") or {}).get("verdict"),
            "failed_stage": (e.get("result") or {}).get("failed_stage"), "gpu_s": round(float(e.get("gpu_s") or 0), 3),
            "stage_s": {k: round(float(v), 3) for k, v in (e.get("result") or {}).get("stage_times") or []}}
           for e in evaluations]
    its = [{k: r.get(k) for k in ("iteration", "verdict", "failed_stage", "score", "accepted", "changed", "lesson")}
           for r in iterations]
    return {"evaluations": evs, "iterations": its}


def read_run(audit_db: Path, run_prefix: str | None) -> tuple[str, list[dict], list[dict], dict | None]:
    from agent.audit import Audit
    with Audit(audit_db) as audit:
        run_id = audit.resolve_run(run_prefix) if run_prefix else audit.run_ids()[-1]
        evals = [r.body for r in audit.records(run_id, "evaluation")]
        iters = [r.body["record"] for r in audit.records(run_id, "iteration")]
        end = audit.records(run_id, "run_end")
        return run_id, evals, iters, (end[-1].body.get("used") if end else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("audit_db", type=Path)
    ap.add_argument("--run", default=None, help="a run id or its prefix (default: the last run)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--records", type=Path, default=None, help="also write every evaluation (role, verdict, GPU "
                    "seconds, stage times) and iteration (verdict, score, change, lesson) of the run, compactly")
    args = ap.parse_args(argv)
    if not args.audit_db.is_file():
        print(f"no audit database at {args.audit_db}", file=sys.stderr)
        return 2
    run_id, evals, iters, used = read_run(args.audit_db, args.run)
    report = {"run_id": run_id, **summarize(evals, iters, used)}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.records:
        args.records.write_text(json.dumps(compact_records(evals, iters), indent=0))
    for role, stages in report["stage_median_s"].items():
        if stages:
            print(f"{role} evaluations, median stage times:")
        for name, s in list(stages.items())[:10]:
            print(f"  {name:<40}{s:7.2f} s")
    fmt = lambda x: "-" if x is None else str(x)   # noqa: E731
    print(f"{'run':<34}{'cands':>6}{'median s':>9}{'per GPU-min':>12}{'after start':>12}{'acc':>5}")
    print(f"{run_id[:33]:<34}{report['candidates']:>6}{fmt(report['candidate_median_s']):>9}"
          f"{fmt(report['candidates_per_gpu_minute_whole_run']):>12}"
          f"{fmt(report['candidates_per_gpu_minute_after_start']):>12}{report['accepted']:>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
