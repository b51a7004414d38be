"""Replay a recorded run's timed screens on one latency floor: which candidates the screen let through as it
ran (each score on its own process's floor) and which it lets through with every score on the run's floor
(agent/run_floor.py RunFloor), against the same bar (the incumbent's first timing alone) and margin.

    python -m agent.studies.rescreen HOME/audit.db [--margin 0.005]

Reads the trail only. Screens of the first incumbent (the seed) only: after an acceptance the bar was the
winner's confirmation, which the replay does not rebuild.
"""
from __future__ import annotations

import argparse
import sys

from agent.acceptance import run_score
from agent.audit import Audit
from agent.records import Accepted, Evaluation, typed
from agent.run_floor import RunFloor, measured_floor_us, pin_floor


def replay(db_path: str, margin: float = 0.005) -> list[dict]:
    """One row per run: screens, how many passed as recorded and on the run's floor, the floors used."""
    audit = Audit(db_path)
    rows = []
    for run_id in audit.run_ids():
        recs = typed(audit, run_id)
        evals = [r for r in recs if isinstance(r, Evaluation)]
        floor = RunFloor.of((e.role, e.iteration, e.eval_result) for e in evals).floor_us
        first_win = next((r.iteration for r in recs if isinstance(r, Accepted) and not r.seed), None)
        bar_ev = next((e for e in evals if e.role == "screen_incumbent"), None)
        if floor is None or bar_ev is None:
            continue
        bar_raw, bar_pinned = run_score(bar_ev.eval_result()), run_score(pin_floor(bar_ev.eval_result(), floor))
        raw = pinned = n = gained = lost = 0
        for e in evals:
            if e.role != "screen" or (first_win is not None and e.iteration > first_win):
                continue
            res = e.eval_result()
            if not res.accepted:
                continue
            n += 1
            before = run_score(res) > bar_raw * (1 - margin)
            after = run_score(pin_floor(res, floor)) > bar_pinned * (1 - margin)
            raw, pinned = raw + before, pinned + after
            gained, lost = gained + (after and not before), lost + (before and not after)
        rows.append({"run_id": run_id, "screens": n, "passed_as_recorded": raw, "passed_on_run_floor": pinned,
                     "screened_out_only_as_recorded": gained, "passed_only_as_recorded": lost,
                     "run_floor_us": floor, "bar_floor_us": measured_floor_us(bar_ev.eval_result())})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agent.studies.rescreen", description=__doc__.splitlines()[0])
    ap.add_argument("audit_db", nargs="+")
    ap.add_argument("--margin", type=float, default=0.005, help="acceptance.screen_margin (default 0.005)")
    args = ap.parse_args(argv)
    print("| run | screens | passed as recorded | passed on the run's floor | out only as recorded | "
          "through only as recorded | run's floor us | bar's floor us |")
    print("|---|---|---|---|---|---|---|---|")
    for path in args.audit_db:
        for r in replay(path, args.margin):
            print(f"| {r['run_id']} | {r['screens']} | {r['passed_as_recorded']} | {r['passed_on_run_floor']} | "
                  f"{r['screened_out_only_as_recorded']} | {r['passed_only_as_recorded']} | "
                  f"{r['run_floor_us']:.2f} | {r['bar_floor_us']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
