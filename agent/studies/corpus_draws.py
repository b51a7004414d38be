"""Does every corpus file get its verdict on every draw? The red-team and honest corpora under several seeds.

    python -m agent.studies.corpus_draws [--draws 5] [--only rt_causal,honest/] [--shard 0/2] [--out OUT.jsonl]

The corpus test (tests/sandbox/test_corpus.py) runs each file once, on the fresh secret seed every evaluation
draws: its inputs and hold-out shapes. A cheat that the gates catch on most draws but not all is a hole in the
sandbox that CI shows only now and then, and an honest file rejected on some draws is a false rejection a user's
run meets too (causal_conv1d_channel_per_program failed CI once in many runs, 2026-12-06). Here every CPU file
(`needs: cpu`) runs through `sandbox.evaluate` as the corpus test runs it (its visible shapes, 2 trials, the
interpreter, no timing) with the seeds 0..draws-1 given to the request, so each draw is reproducible: rerun one
with `--only <file> --first-seed S --draws 1`.

Each evaluation is one JSON line (file, seed, verdict, stage, the first reason, seconds), written as it ends, so a
stopped run keeps what it did and `--resume` skips what is there. The summary lists every file whose verdict or
stage was not what its header expects on some draw. Exit status 1 when there is one. `--shard i/n` takes every
n-th file from the i-th (two processes on two cores).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "sandbox"


def cpu_files(only: list[str]) -> list[Path]:
    """The corpus files that run on the CPU, red-team first, those whose 'folder/name' contains any of `only`."""
    from sandbox.corpus import corpus_files, parse_header
    out = []
    for p in corpus_files(CORPUS):
        if parse_header(p.read_text()).get("needs") != "cpu":
            continue
        label = f"{p.parent.name}/{p.stem}"
        if not only or any(o in label for o in only):
            out.append(p)
    return out


def as_expected(head: dict, verdict: str, stage: str | None) -> bool:
    """Whether one evaluation's outcome is what the file's header expects (the corpus test's rule)."""
    if head["expect"] == "accept":
        return verdict == "accepted"
    return verdict != "accepted" and stage in head.get("stage", "").split("|")


def evaluate_file(path: Path, seed: int, pool) -> dict:
    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator
    from sandbox.corpus import parse_header, visible_shapes
    from sandbox.evaluation import EvalRequest, evaluate
    from sandbox.settings import SandboxSettings
    source = path.read_text()
    head = parse_header(source)
    spec = load_operator(head["op"])
    req = EvalRequest(op=head["op"], source=source, shapes=visible_shapes(spec, head), hardware=study_hardware(),
                      settings=SandboxSettings(trials=2, timeout_s=float(head.get("timeout_s", 300))),
                      timing=False, interpreter=True, seed=seed)
    t0 = time.monotonic()
    res = evaluate(req, pool=pool)
    return {"file": f"{path.parent.name}/{path.stem}", "seed": seed, "expect": head["expect"],
            "verdict": res.verdict, "stage": res.failed_stage, "ok": as_expected(head, res.verdict, res.failed_stage),
            "reason": (res.reasons or [""])[0][:400], "seconds": round(time.monotonic() - t0, 2)}


def summary(rows: list[dict]) -> tuple[str, int]:
    """(a table of the files not as expected on some draw, how many such files)."""
    by_file: dict[str, list[dict]] = {}
    for r in rows:
        by_file.setdefault(r["file"], []).append(r)
    bad = {f: rs for f, rs in by_file.items() if not all(r["ok"] for r in rs)}
    lines = [f"{len(by_file)} files, {len(rows)} evaluations; not as expected on some draw: {len(bad)}"]
    if bad:
        lines += ["", "| file | expect | draws not as expected (seed: verdict at stage) | first such reason |",
                  "|---|---|---|---|"]
        for f, rs in sorted(bad.items()):
            miss = [r for r in rs if not r["ok"]]
            outcomes = ", ".join(f"{r['seed']}: {r['verdict']} at {r['stage']}" for r in miss)
            lines.append(f"| {f} | {rs[0]['expect']} | {len(miss)} of {len(rs)} ({outcomes}) | "
                         f"{miss[0]['reason'][:160]} |")
    stages = {f: sorted({str(r["stage"]) for r in rs}) for f, rs in by_file.items() if f not in bad}
    varied = {f: s for f, s in stages.items() if len(s) > 1}
    if varied:
        lines += ["", "Caught on every draw, at more than one gate: " +
                  "; ".join(f"{f} ({', '.join(s)})" for f, s in sorted(varied.items()))]
    return "\n".join(lines), len(bad)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=5, help="seeds per file (default 5)")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--only", default="", help="comma-separated parts of 'folder/name' to keep, e.g. rt_top_k,honest/")
    ap.add_argument("--shard", default="0/1", help="i/n: every n-th file from the i-th (default 0/1: all)")
    ap.add_argument("--out", default="", help="JSON lines, one evaluation each, appended as they end")
    ap.add_argument("--resume", action="store_true", help="skip the (file, seed) pairs already in --out")
    a = ap.parse_args(argv)
    if a.draws < 1:
        ap.error(f"--draws {a.draws}: at least 1")
    try:
        i, n = (int(x) for x in a.shard.split("/"))
        if not 0 <= i < n:
            raise ValueError
    except ValueError:
        ap.error(f"--shard {a.shard!r}: i/n with 0 <= i < n, e.g. 0/2")
    if a.resume and not a.out:
        ap.error("--resume needs --out (the file it resumes)")
    files = cpu_files([o for o in a.only.split(",") if o])[i::n]
    if not files:
        ap.error(f"no CPU corpus file under {CORPUS} matches --only {a.only!r} in shard {a.shard}")
    out = Path(a.out) if a.out else None
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()] if a.resume and out.exists() \
        else []
    done = {(r["file"], r["seed"]) for r in rows}
    from sandbox.prestart import WorkerPool
    todo = [(p, s) for p in files for s in range(a.first_seed, a.first_seed + a.draws)
            if (f"{p.parent.name}/{p.stem}", s) not in done]
    print(f"{len(files)} files x {a.draws} seeds: {len(todo)} evaluations to run ({len(done)} already in {out})",
          flush=True)
    with WorkerPool(prestart=True) as pool:
        for k, (path, seed) in enumerate(todo, 1):
            row = evaluate_file(path, seed, pool)
            rows.append(row)
            if out:
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
            mark = "ok" if row["ok"] else "NOT AS EXPECTED"
            print(f"[{k}/{len(todo)}] {row['file']} seed {seed}: {row['verdict']} at {row['stage']} "
                  f"({row['seconds']} s) {mark}", flush=True)
    text, n_bad = summary(rows)
    print(text)
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
