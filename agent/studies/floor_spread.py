"""How far apart do fresh processes read the latency floor, launched plainly and under PDL?

    python -m agent.studies.floor_spread --out OUT.json [--processes 12] [--repeats 3]

Session 36's searches (an H100, 2026-12-07) recorded floors of 0.98-1.66 us in one run's evaluations, each a
fresh worker process; about one in ten read near 1.0 (agent/run_floor.py pins one floor a run since). The score's
floor is the lesser of the floor kernel launched plainly and under PDL (benchmarks/gpu_timer.floor_parts_s), and
the trails of that time kept only the lesser. Here each of `--processes` fresh Python processes measures both,
`--repeats` times in a row, so the table says whether the spread is between processes or within one, and which
launch carries it. Each process prints one JSON line; this driver collects them.

Session 37's answer on an H100: 12 quiet processes read 1.42-1.54 us (1.47-1.50 their medians), while the same
run's search evaluations, beside the search's compile pool, read 1.06-1.73. `--load N` keeps N busy-looping
processes running while each child measures (a host as busy as a search's), and `--no-hold` turns off the hold
before each timed batch (benchmarks/gpu_timer.py held_batch), so the four runs of quiet/loaded x hold/no hold
say whether a busy host moved the floor and whether the hold keeps it still. Each row keeps the child's hold
counts (batches, held, retried, unheld).

Session 38's answer on an H100: neither moved it (1.43-1.56 us in all four), and a search whose every batch was
held still read 1.00-1.73. `--spares N` keeps N loops running, each starting one fresh process after another that
does a pre-started worker's GPU start-up (sandbox/worker.py warm_gpu: CUDA context, CUPTI, the digest kernel;
`--spare-stages` picks which besides the context), waits `--spare-linger` seconds and exits, as a search's worker
pool does beside every evaluation: with 3 loops, all stages and no linger the floor read 0.94-1.64 (session 38,
an H100). `--lock` turns the GPU's lock on in every child (AKA_GPU_LOCK=on, benchmarks/gpu_lock.py), so the
start-ups wait for the timed replays and the replays for the start-ups; without it AKA_GPU_LOCK=off is set.

Those spares' floors were lower (0.94-1.2 against 1.43-1.56 quiet), never higher: work of another context
seems to keep the GPU's clocks up between the replays, where a quiet GPU lets them drop. So each child also reads
the SM clock (NVML) after each floor (`sm_mhz`, None without nvidia-ml-py), and `--gpu-tick N` runs N processes
that each launch one tiny kernel every millisecond and nothing else: GPU activity of other contexts without a
start-up (no context created, no CUPTI, no exit while measuring).

Session 40's answer on an H100 (benchmarks/results/session40_h100.md): the ticks lowered every floor by about
0.2 us (1.04-1.42, median 1.26, against 1.37-1.58 quiet) while NVML read 1980 MHz after every one; spares bringing
up the context only (`--spare-stages ""`) spread the floor as much as spares bringing up everything.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

from sandbox.gpu_gates import add_hold_stats
from sandbox.settings import WARM_STAGES

# The SM clock from sandbox.isolation.gpu_environment: NVML's handle of torch's device 0 (matched by UUID)
CHILD = ("import json, sys; from benchmarks import gpu_timer as g; g.HOLD_ENABLED = sys.argv[2] == '1'\n"
         "from sandbox.isolation import gpu_environment\n"
         "clock = lambda: (gpu_environment(0).get('clocks_mhz') or {}).get('sm')\n"
         "parts = []\n"
         "for _ in range(int(sys.argv[1])):\n"
         "    p = {k: (None if v is None else v * 1e6) for k, v in g.floor_parts_s().items()}\n"
         "    parts.append(dict(p, sm_mhz=clock()))\n"
         "print(json.dumps({'parts': parts, 'hold': g.take_hold_stats()}))")
# One tiny kernel a millisecond, forever (GPU activity of another context, nothing else)
GPU_TICK = ("import time, torch\nx = torch.zeros(1, device='cuda')\n"
            "while True:\n    x.add_(1); torch.cuda.synchronize(); time.sleep(0.001)")
BUSY = "while True: pass"
SPARE = ("import sys, time, torch; from sandbox.worker import warm_gpu\n"
         "warm_gpu(torch, sys.argv[1].split(',') if sys.argv[1] else ()); time.sleep(float(sys.argv[2]))")
SPARE_LOOP = ("import subprocess, sys\n"
              "while True: subprocess.run([sys.executable, '-c'] + sys.argv[1:], stdout=subprocess.DEVNULL)")
ALL_STAGES = ",".join(WARM_STAGES)


def child_env(lock: bool) -> dict:
    """The children's environment: the project importable; AKA_GPU_LOCK on or off."""
    return dict(os.environ, AKA_GPU_LOCK="on" if lock else "off",
                PYTHONPATH=os.pathsep.join(p for p in (str(Path.cwd()), os.environ.get("PYTHONPATH")) if p))


def _stop_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def measure(processes: int, repeats: int, python: str = sys.executable, timeout_s: float = 120.0, load: int = 0,
            hold: bool = True, spares: int = 0, lock: bool = False, spare_stages: str = ALL_STAGES,
            spare_linger_s: float = 0.0, gpu_tick: int = 0) -> list[dict]:
    """One row per process: its `repeats` plain and PDL floors (us) and hold and lock counts, or its error;
    `load` busy processes and `spares` loops of worker start-ups (`spare_stages`, then `spare_linger_s` idle)
    run beside each, and `gpu_tick` processes launching a tiny kernel every millisecond."""
    rows = []
    env = child_env(lock)
    for k in range(processes):
        busy = [subprocess.Popen([python, "-c", BUSY]) for _ in range(load)]
        loops = [subprocess.Popen([python, "-c", SPARE_LOOP, SPARE, spare_stages, str(spare_linger_s)], env=env,
                                  start_new_session=True) for _ in range(spares)]
        loops += [subprocess.Popen([python, "-c", GPU_TICK], env=env, start_new_session=True) for _ in range(gpu_tick)]
        try:
            done = subprocess.run([python, "-c", CHILD, str(repeats), "1" if hold else "0"], capture_output=True,
                                  text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            rows.append({"process": k, "error": f"no answer in {timeout_s:g} s"})
            continue
        finally:
            for b in busy:
                b.kill()
                b.wait()
            for loop in loops:
                _stop_group(loop)
        if done.returncode != 0:
            rows.append({"process": k, "error": (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]})
            continue
        reply = json.loads(done.stdout.strip().splitlines()[-1])
        parts = reply["parts"]
        rows.append({"process": k, "plain": [p["plain"] for p in parts], "pdl": [p["pdl"] for p in parts],
                     "sm_mhz": [p.get("sm_mhz") for p in parts], "hold": reply["hold"]})
    return rows


def summary(rows: list[dict]) -> dict:
    """Per launch: the spread of all readings, of the processes' medians, and the largest spread inside one."""
    out = {}
    for kind in ("plain", "pdl"):
        per = [[x for x in r.get(kind) or [] if x is not None] for r in rows]
        per = [p for p in per if p]
        if not per:
            continue
        flat = [x for p in per for x in p]
        medians = [statistics.median(p) for p in per]
        out[kind] = {"min": min(flat), "median": statistics.median(flat), "max": max(flat),
                     "process_medians_min": min(medians), "process_medians_max": max(medians),
                     "widest_within_one_process": max(max(p) - min(p) for p in per)}
    return out


def by_sm_clock(rows: list[dict]) -> dict[int, dict]:
    """The plain floors grouped by the SM clock read just after each: {MHz: {n, median, min, max}} (us), the
    question being whether the low floors are the high clocks."""
    groups: dict[int, list[float]] = {}
    for r in rows:
        for floor, mhz in zip(r.get("plain") or [], r.get("sm_mhz") or []):
            if floor is not None and mhz is not None:
                groups.setdefault(int(mhz), []).append(floor)
    return {mhz: {"n": len(v), "median": statistics.median(v), "min": min(v), "max": max(v)}
            for mhz, v in sorted(groups.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agent.studies.floor_spread", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--processes", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--load", type=int, default=0, help="busy-looping processes beside each measuring one")
    ap.add_argument("--no-hold", action="store_true", help="time without the hold before each batch")
    ap.add_argument("--spares", type=int, default=0, help="loops of worker GPU start-ups beside each measuring one")
    ap.add_argument("--spare-stages", default=ALL_STAGES,
                    help=f"warm_gpu's stages a start-up runs besides the context (default {ALL_STAGES}; '' none)")
    ap.add_argument("--spare-linger", type=float, default=0.0, help="seconds a start-up idles before it exits")
    ap.add_argument("--lock", action="store_true", help="AKA_GPU_LOCK=on for every child (else off)")
    ap.add_argument("--gpu-tick", type=int, default=0,
                    help="processes beside each measuring one that launch a tiny kernel every millisecond")
    args = ap.parse_args(argv)
    stages = [s for s in args.spare_stages.split(",") if s]
    if (args.processes < 1 or args.repeats < 1 or args.load < 0 or args.spares < 0 or args.spare_linger < 0
            or args.gpu_tick < 0):
        ap.error(f"--processes {args.processes} and --repeats {args.repeats}: each at least 1; --load {args.load}, "
                 f"--spares {args.spares}, --spare-linger {args.spare_linger} and --gpu-tick {args.gpu_tick}: at "
                 f"least 0")
    if set(stages) - set(WARM_STAGES):
        ap.error(f"--spare-stages {args.spare_stages!r}: give a comma-separated subset of {ALL_STAGES}")
    rows = measure(args.processes, args.repeats, load=args.load, hold=not args.no_hold, spares=args.spares,
                   lock=args.lock, spare_stages=",".join(stages), spare_linger_s=args.spare_linger,
                   gpu_tick=args.gpu_tick)
    held: dict = {}
    for r in rows:
        add_hold_stats(held, r.get("hold"))
    result = {"load": args.load, "hold": not args.no_hold, "spares": args.spares, "spare_stages": stages,
              "spare_linger_s": args.spare_linger, "lock": args.lock, "gpu_tick": args.gpu_tick, "rows": rows,
              "summary": summary(rows), "plain_by_sm_mhz": by_sm_clock(rows), "hold_counts": held}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    for r in rows:
        if "error" in r:
            print(f"process {r['process']}: {r['error']}")
        else:
            fmt = lambda xs: " ".join("-" if x is None else f"{x:.2f}" for x in xs)   # noqa: E731
            mhz = " ".join("-" if c is None else str(c) for c in r["sm_mhz"])
            print(f"process {r['process']}: plain {fmt(r['plain'])} | pdl {fmt(r['pdl'])} | SM MHz {mhz}")
    for mhz, g in result["plain_by_sm_mhz"].items():
        print(f"plain at {mhz} MHz: {g['n']} floors, {g['min']:.2f} / {g['median']:.2f} / {g['max']:.2f} us")
    for kind, s in result["summary"].items():
        print(f"{kind}: {s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f} us (min / median / max); process "
              f"medians {s['process_medians_min']:.2f}-{s['process_medians_max']:.2f}; widest within one process "
              f"{s['widest_within_one_process']:.2f}")
    print(f"load {args.load}, spares {args.spares} ({','.join(stages) or 'context only'}, linger "
          f"{args.spare_linger:g} s), gpu ticks {args.gpu_tick}, hold {'on' if not args.no_hold else 'off'}, "
          f"lock {'on' if args.lock else 'off'}: " + ", ".join(f"{k} {v}" for k, v in held.items()))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
