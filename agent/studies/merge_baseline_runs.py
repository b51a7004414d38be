"""Several measure_baselines runs as one report: their records merged (a later run's shapes replace an earlier
run's), rendered by baseline_report like one run, with every run's command, floor and rounds in the header and
suite_status's table of issue 15's targets over the same records after the summary.

    python -m agent.studies.merge_baseline_runs RUN1/records.json RUN2/records.json ... --out benchmarks/results/h200.md

One device call may run 10 minutes and every operator beside every baseline takes longer, so the suite is
measured in several runs on one warm machine; each operator's seed and baselines are still timed side by side in
one process. The runs must share a GPU and datasheet: a merge of an H100's and an H200's records exits 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.studies import baseline_report, suite_status


def merge(paths: list[Path]) -> tuple[list[dict], dict]:
    """(records, meta) of the runs in order: a (op, shape) measured again replaces all its earlier records."""
    records: dict[tuple[str, str], list[dict]] = {}
    runs, gpus, hardware = [], set(), set()
    env = None
    for p in paths:
        data = json.loads(p.read_text())
        meta = data.get("meta", {})
        env = env or meta.get("env", {})
        gpus.add(meta.get("env", {}).get("gpu"))
        hardware.add(meta.get("hardware"))
        runs.append({k: meta.get(k) for k in ("command", "wall_s", "floor_us", "floor_samples_us", "rounds", "rounds_max_us")})
        fresh: dict[tuple[str, str], list[dict]] = {}
        for r in data.get("records", []):
            fresh.setdefault((r["op"], r["shape"]), []).append(r)
        for key, recs in fresh.items():
            records.pop(key, None)
            records[key] = recs
    if len(gpus) > 1 or len(hardware) > 1:
        raise ValueError(f"the runs are of several GPUs or datasheets ({sorted(map(str, gpus))}, "
                         f"{sorted(map(str, hardware))}): merge the runs of one card only")
    return [r for recs in records.values() for r in recs], {"env": env, "runs": runs, "hardware": hardware.pop()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("records", nargs="+", type=Path, help="records.json of measure_baselines runs, earliest first")
    ap.add_argument("--out", type=Path, required=True, help="the merged markdown report")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.records if not p.is_file()]
    if missing:
        print(f"merge_baseline_runs: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        records, meta = merge(args.records)
        status = suite_status.render(suite_status.status(args.records)).split("\n", 2)[2]     # without its title
    except (ValueError, KeyError, suite_status.NoRecords) as exc:
        print(f"merge_baseline_runs: {exc}", file=sys.stderr)
        return 2
    from benchmarks.hardware import study_hardware
    text = baseline_report.render(records, meta, study_hardware(meta["hardware"]))
    # after the summary (the report's second section), before the operators' sections
    preamble, summary, *operators = text.split("\n## ", 2)
    text = "\n## ".join([preamble, summary, "Issue 15's targets (agent/studies/suite_status.py, same records)\n\n"
                         + status, *operators])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}: {len({r['op'] for r in records})} operators, {len(args.records)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
