"""The latency floor each evaluation of a run read, by role: how far apart a run's processes measure it.

    python -m agent.studies.run_floors HOME/audit.db [...]

Every sandbox evaluation measures T_floor in its own worker; before agent/run_floor.py the loop compared scores
computed with those floors, so the spread printed here was noise in every screen. Reads the trail only.
"""
from __future__ import annotations

import statistics
import sys

from agent.audit import Audit
from agent.run_floor import measured_floor_us
from sandbox.verdict import EvalResult


def _evaluations(db_path: str) -> list[dict]:
    return [r.body for r in Audit(db_path).records(kind="evaluation")]


def floors_by_role(db_path: str) -> dict[str, list[float]]:
    """role -> the floor (us) of each timed evaluation, in trail order."""
    out: dict[str, list[float]] = {}
    for ev in _evaluations(db_path):
        floor = measured_floor_us(EvalResult.from_json(ev["result"]))
        if floor is not None:
            out.setdefault(ev.get("role") or "?", []).append(floor)
    return out


def launch_floors(db_path: str) -> dict[str, list[float]]:
    """"plain" / "pdl" -> the floor kernel's time (us) launched each way, from every evaluation that kept both
    (sandbox/gpu_gates.py, since 2026-12-07); the score's floor is the lesser of a pair."""
    out: dict[str, list[float]] = {}
    for ev in _evaluations(db_path):
        for kind, us in (((ev.get("result") or {}).get("environment") or {}).get("floor_us") or {}).items():
            if us is not None:
                out.setdefault(kind, []).append(float(us))
    return out


def floors_by_sm_clock(db_path: str) -> dict[int, list[float]]:
    """SM clock (MHz, read by the parent as the evaluation began: sandbox/isolation.py host_environment) -> the
    floors (us) of the evaluations that read it: whether a run's low floors are its high clocks
    (agent/studies/floor_spread.py asks the same of fresh processes)."""
    out: dict[int, list[float]] = {}
    for ev in _evaluations(db_path):
        result = EvalResult.from_json(ev["result"])
        floor = measured_floor_us(result)
        mhz = (result.environment.get("clocks_mhz") or {}).get("sm")
        if floor is not None and mhz is not None:
            out.setdefault(int(mhz), []).append(floor)
    return dict(sorted(out.items()))


def hold_counts(db_path: str) -> dict[str, int]:
    """The timed batches of every evaluation, summed: how many were queued whole behind the GPU's hold and how
    many ran unheld (benchmarks/gpu_timer.py held_batch; evaluations since session 37 keep timing_hold)."""
    out: dict[str, int] = {}
    for ev in _evaluations(db_path):
        for k, v in (((ev.get("result") or {}).get("environment") or {}).get("timing_hold") or {}).items():
            out[k] = out.get(k, 0) + int(v)
    return out


def line(name: str, floors: list[float]) -> str:
    if len(floors) == 1:
        return f"{name} {floors[0]:.2f}"
    return (f"{name} n={len(floors)} min {min(floors):.2f} median {statistics.median(floors):.2f} "
            f"max {max(floors):.2f}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for path in argv:
        roles = floors_by_role(path)
        if not roles:
            print(f"{path}: no timed evaluation (an interpreter run?)")
            continue
        print(f"{path}: " + "; ".join(line(role, f) for role, f in roles.items()))
        launches = launch_floors(path)
        if launches:
            print("  the floor kernel launched " + "; ".join(line(kind, launches[kind]) for kind in
                                                             sorted(launches, key=lambda k: (k != "plain", k))))
        clocks = floors_by_sm_clock(path)
        if clocks:
            print("  by SM clock " + "; ".join(line(f"{mhz} MHz", f) for mhz, f in clocks.items()))
        held = hold_counts(path)
        if held:
            print("  timed batches " + ", ".join(f"{k} {v}" for k, v in held.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
