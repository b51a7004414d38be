"""Measure every operator's seed kernel beside PyTorch eager and torch.compile on the hot shapes.

Runs `aka bench` (through the sandbox: CUDA-graph replay, L2 cold, input sets rotated; eager-launch
time beside it) for the seed and both baselines, then writes one markdown report with attainment per
shape against the calibrated ceilings (and the datasheet S_i beside it).

    python3 agent/studies/measure_seeds.py --out benchmarks/results/h200.md [--ops rms_norm,gemm]

A script, not part of the scoring core: it drives the CLI in subprocesses and reads their JSON.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = (("seed", []), ("eager", ["--baseline", "eager"]), ("compile", ["--baseline", "compile"]))


def run_bench(op: str, extra: list[str], shape_set: str, json_path: Path, log, timeout_s: float) -> dict | None:
    cmd = [sys.executable, "-m", "agent.cli", "bench", "--op", op, "--shape-set", shape_set,
           "--json", str(json_path), *extra]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", _text(e.stdout), _text(e.stderr) + f"\n(killed after {timeout_s:g} s)"
    log.write(f"$ {' '.join(cmd)}\n(exit {rc}, {time.time() - t0:.0f} s)\n{out}\n{err[-4000:]}\n")
    log.flush()
    print(f"  {op} {' '.join(extra) or 'seed'}: exit {rc} in {time.time() - t0:.0f} s", flush=True)
    if rc == 2 or not json_path.is_file():
        return None
    return json.loads(json_path.read_text())


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def environment_lines(records: list[dict]) -> list[str]:
    env = next((r.get("environment") for r in records if r and r.get("environment")), {}) or {}
    return [f"- {k}: {v}" for k, v in sorted(env.items()) if not isinstance(v, (dict, list))]


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def _t(row: dict) -> str:
    """A row's scored time, marked when it is not graph replay (a call that syncs with the host)."""
    t = fmt(row.get("t_us"))
    mode = row.get("timing_mode")
    return t if mode in (None, "graph") or t == "-" else f"{t} ({mode})"


def op_section(op: str, runs: dict[str, dict | None]) -> list[str]:
    seed = runs.get("seed")
    lines = [f"## {op}", ""]
    if not seed:
        return lines + ["seed: no result (see the log)", ""]
    lines.append(f"seed verdict: **{seed['verdict']}**" + (f" at {seed['failed_stage']}: {'; '.join(seed['reasons'])}"
                                                          if seed["verdict"] != "accepted" else ""))
    lines.append("")
    other = seed.get("ceilings_other") or {}
    lines.append(f"S_i (seed) = {fmt(seed.get('s_i'), '.3f')} against {seed.get('ceilings', {}).get('source', '?')} "
                 f"ceilings; {fmt(other.get('s_i'), '.3f')} against {other.get('source', '-')}")
    for kind in ("eager", "compile"):
        r = runs.get(kind)
        lines.append(f"S_i ({kind}) = {fmt(r.get('s_i') if r else None, '.3f')}")
    lines += ["", "| shape | dims | T_roof us | seed us | seed eager-launch us | attain | bound | "
                  "PyTorch eager us | torch.compile us | PyTorch eager / seed | torch.compile / seed |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = {kind: {s["id"]: s for s in (r or {}).get("shapes", []) if not s.get("holdout")} for kind, r in runs.items()}
    for s in seed["shapes"]:
        if s.get("holdout"):
            continue
        e = rows.get("eager", {}).get(s["id"], {})
        c = rows.get("compile", {}).get(s["id"], {})
        sp_e = e.get("t_us") / s["t_us"] if e.get("t_us") and s.get("t_us") else None
        sp_c = c.get("t_us") / s["t_us"] if c.get("t_us") and s.get("t_us") else None
        dims = " ".join(f"{k}={v}" for k, v in s["dims"].items())
        lines.append(f"| {s['id']} | {dims} | {fmt(s.get('t_roof_us'))} | {_t(s)} | "
                     f"{fmt(s.get('t_eager_us'))} | {fmt(s.get('attainment'))} | {s.get('bound') or '-'} | "
                     f"{_t(e)} | {_t(c)} | {fmt(sp_e)}x | {fmt(sp_c)}x |")
    return lines + [""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="markdown report to write")
    ap.add_argument("--ops", default="", help="comma-separated operators (default: all)")
    ap.add_argument("--shape-set", default="hot")
    ap.add_argument("--work", type=Path, default=None, help="where JSON records and the log go (default: beside --out)")
    ap.add_argument("--kinds", default="seed,eager,compile", help="which of seed, eager, compile to run")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for one aka bench")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.registry import list_operators
    ops = [o for o in args.ops.split(",") if o] or list_operators()
    work = args.work or args.out.parent / (args.out.stem + "_records")
    work.mkdir(parents=True, exist_ok=True)
    all_runs: dict[str, dict] = {}
    with open(work / "log.txt", "w") as log:
        for op in ops:
            print(f"{op} ...", flush=True)
            all_runs[op] = {kind: run_bench(op, extra, args.shape_set, work / f"{op}_{kind}.json", log, args.timeout)
                            for kind, extra in KINDS if kind in args.kinds.split(",")}
    records = [r for runs in all_runs.values() for r in runs.values() if r]
    lines = [f"# Seed kernels on the GPU ({datetime.date.today().isoformat()})", "",
             f"Command: `python3 agent/studies/measure_seeds.py --out {args.out} --shape-set {args.shape_set}`", "",
             "Timing: CUDA-graph replay, L2 flushed, input sets rotated, median (the score's T); the eager-launch "
             "time beside it. Baselines are what a user would run instead (each operator's `baseline()`: e.g. "
             "`a @ b.T` in bf16 for gemm, the per-expert loop for fused_moe), eager and under torch.compile, "
             "timed the same way; a call that syncs with the host cannot be graph-captured and is timed with "
             "eager launches (marked). Ratios > 1 mean the seed is faster.", "",
             "Environment:", *environment_lines(records), ""]
    for op, runs in all_runs.items():
        lines += op_section(op, runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
