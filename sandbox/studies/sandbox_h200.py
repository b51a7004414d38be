"""The sandbox on a GPU: both corpora's verdicts, the timing spread of one kernel measured twice, and the
agreement between the sandbox's median and Nsight Compute's kernel duration on the same shapes.

    python3 sandbox/studies/sandbox_h200.py --out benchmarks/results/sandbox_h200.md [--skip-ncu]

A driver script (it imports the sandbox); the scoring core in benchmarks/ imports nothing of aka.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sandbox.settings import SandboxSettings  # noqa: E402 - after the path insert; imports no torch


def run_corpus(load_hardware, evaluate, EvalRequest, corpus, log, only: str = "") -> list[dict]:
    hw = load_hardware("h200")
    rows = []
    for path in corpus.corpus_files(ROOT / "tests" / "sandbox"):
        if only and not re.search(only, path.name):
            continue
        text = path.read_text()
        head = corpus.parse_header(text)
        from benchmarks.registry import load_operator
        spec = load_operator(head["op"])
        shapes = corpus.visible_shapes(spec, head)
        t0 = time.time()
        res = evaluate(EvalRequest(op=head["op"], source=text, shapes=tuple(shapes), hardware=hw,
                                   settings=SandboxSettings(timeout_s=float(head.get("timeout_s", 120)))))
        want_stage = head.get("stage")
        ok = (res.verdict == "accepted") if head["expect"] == "accept" else (
            res.verdict == "rejected" and (want_stage is None or res.failed_stage in want_stage.split("|")))
        row = {"file": f"{path.parent.name}/{path.name}", "op": head["op"], "expect": head["expect"],
               "want_stage": want_stage, "verdict": res.verdict, "stage": res.failed_stage,
               "reason": (res.reasons[0] if res.reasons else ""), "as_expected": ok, "wall_s": time.time() - t0,
               "why": head.get("why", "")}
        rows.append(row)
        log.write(json.dumps(row) + "\n")
        print(f"{'ok ' if ok else 'BAD'} {row['file']:55s} {res.verdict:8s} {res.failed_stage or '':12s} "
              f"{row['reason'][:90]}", flush=True)
    return rows


def seed_twice(load_hardware, load_operator, evaluate, EvalRequest, op: str, counters: bool) -> list:
    spec = load_operator(op)
    shapes = spec.select("hot")
    runs = []
    for i in range(2):
        res = evaluate(EvalRequest(op=op, source=Path(spec.seed_path).read_text(), shapes=tuple(shapes),
                                   hardware=load_hardware("h200"),
                                   settings=SandboxSettings(counters=counters and i == 0, counter_shapes=2)))
        runs.append(res)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip-ncu", action="store_true")
    ap.add_argument("--spread-ops", default="rms_norm,gemm")
    ap.add_argument("--only", default="", help="regex on corpus file names (a quick partial run)")
    ap.add_argument("--corpus-from", type=Path, help="reuse the corpus.jsonl of an earlier run; time the spread only")
    args = ap.parse_args()
    import torch
    import triton

    from benchmarks.hardware import load_hardware
    from benchmarks.registry import load_operator
    from sandbox import corpus
    from sandbox.evaluation import EvalRequest, evaluate

    work = args.out.parent / (args.out.stem + "_records")
    work.mkdir(parents=True, exist_ok=True)
    if args.corpus_from:      # the corpus verdicts of an earlier run (a run split across two device calls)
        rows = [json.loads(line) for line in args.corpus_from.read_text().splitlines() if line.strip()]
        (work / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        with open(work / "corpus.jsonl", "w") as log:
            rows = run_corpus(load_hardware, evaluate, EvalRequest, corpus, log, args.only)
    spread = {op: seed_twice(load_hardware, load_operator, evaluate, EvalRequest, op, not args.skip_ncu)
              for op in [o for o in args.spread_ops.split(",") if o]}
    (work / "spread.json").write_text(json.dumps({op: [r.to_json() for r in runs] for op, runs in spread.items()},
                                                 indent=1, default=str))
    env = next((r.environment for runs in spread.values() for r in runs if r.environment), {})
    bad = [r for r in rows if not r["as_expected"]]
    honest = [r for r in rows if r["expect"] == "accept"]
    lines = [f"# The sandbox on the H200 ({datetime.date.today().isoformat()})", "",
             f"Command: `python3 sandbox/studies/sandbox_h200.py --out {args.out}`", "",
             f"torch {torch.__version__}, triton {triton.__version__}; "
             + ", ".join(f"{k}: {v}" for k, v in sorted(env.items()) if not isinstance(v, (dict, list))), "",
             "## Corpora", "",
             f"{len(rows)} files: {len(rows) - len(honest)} red-team, {len(honest)} honest. "
             f"False rejections: {sum(r['verdict'] != 'accepted' for r in honest)}. "
             f"Not as expected: {len(bad)}.", "",
             "| file | op | expected | verdict | stage | reason (first) |", "|---|---|---|---|---|---|"]
    for r in rows:
        reason = r["reason"].replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {r['file']} | {r['op']} | {r['expect']} {r['want_stage'] or ''} | {r['verdict']} | "
                     f"{r['stage'] or '-'} | {reason} |")
    lines += ["", "## The same kernel measured twice (two evaluations, fresh workers)", "",
              "| op | shape | t1 us | t2 us | diff % | ncu duration us (sum of kernels) | ncu / sandbox |",
              "|---|---|---|---|---|---|---|"]
    for op, (a, b) in spread.items():
        ncu = _ncu_by_shape(a)
        for ra, rb in zip(a.visible_shapes(), b.visible_shapes()):
            d = (rb.t_us - ra.t_us) / ra.t_us * 100 if ra.t_us and rb.t_us else None
            n = ncu.get(ra.id)
            lines.append(f"| {op} | {ra.id} | {_f(ra.t_us)} | {_f(rb.t_us)} | {_f(d, '+.1f')} | {_f(n)} | "
                         f"{_f(n / ra.t_us if n and ra.t_us else None, '.2f')} |")
        lines.append(f"| {op} | counters | {a.counters.get('reason', '') if isinstance(a.counters, dict) else ''} |||||")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-40:]))
    return 0


def _ncu_by_shape(result) -> dict[str, float]:
    """Sum of kernel durations per visible shape from the counter record, matched by the shape's dims."""
    rec = result.counters or {}
    out = {}
    for entry in rec.get("shapes", []) or []:
        dims = entry[0] if isinstance(entry, (list, tuple)) else entry.get("dims", {})
        kernels = entry[1] if isinstance(entry, (list, tuple)) else entry.get("kernels", [])
        total = sum((k.get("duration_us") or 0.0) for k in kernels)
        for s in result.visible_shapes():
            if s.dims == dict(dims) and total:
                out[s.id] = total
    return out


def _f(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


if __name__ == "__main__":
    raise SystemExit(main())
