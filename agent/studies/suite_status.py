"""Where the whole operator suite stands against issue 15's two targets, from records already written (no GPU).

    python -m agent.studies.suite_status PATH... [--out status.md] [--json status.json]

A PATH is a new_ops.json (agent/studies/measure_new_ops.py), a records.json (agent/studies/measure_baselines.py),
or a folder searched recursively for both. Per operator, over its measured hot shapes:

  target A  every shape's seed time is at or below the best baseline's: the fastest of eager, compile, liger
            (cublas ...) that passed its correctness check, was timed, and keeps the operator's contract
  target B  the median of the seed's attainment, min(1, max(T_roof, floor) / T_seed), is at least 0.6

Where one (operator, shape) appears in several inputs, the later PATH on the command line wins (a rerun after
a fix is named after the run it replaces); inside a folder, files are taken in sorted path order.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from agent.studies.baseline_report import SUITE_ATTAINMENT as B_BAR, attainment as record_attainment
from agent.studies.baseline_report import best, by_shape, fmt, median_interval, paired_ratios
from agent.studies.measure_new_ops import attainment, best_other

NAMES = ("new_ops.json", "records.json")
# At a few microseconds one timing spreads several percent (h200.md, 2026-12-04): a loss this close is noise.
NOISE = 0.02


class NoRecords(Exception):
    """An input path that does not exist or holds no records of either study."""


def input_files(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        if not p.exists():
            raise NoRecords(f"{p}: no such file or folder")
        found = sorted(f for n in NAMES for f in p.rglob(n)) if p.is_dir() else [p]
        if not found:
            raise NoRecords(f"{p}: holds no {' or '.join(NAMES)}")
        out += found
    return out


def shapes_of(path: Path) -> tuple[list[dict], str, str]:
    """(one entry per measured shape, GPU, hardware ceilings' name) of one study's JSON. An entry: op, shape,
    t_seed (None: the seed failed or was not timed), attainment, best (baseline name or None), t_best."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise NoRecords(f"{path}: not readable JSON ({type(exc).__name__})") from exc
    out = []
    if isinstance(data, dict) and data.get("rows"):                          # measure_new_ops
        for r in data["rows"]:
            seed = r["contenders"].get("seed") or {}
            t = seed.get("t_us") if seed.get("ok") and not seed.get("error") else None
            name, tb = best_other(r)      # correct, timed, and not another contract
            out.append({"op": r["op"], "shape": r["shape"], "t_seed": t, "best": name, "t_best": tb,
                        "attainment": attainment(t, r["t_roof_us"], data.get("floor_us") or 0.0)})
        return out, data.get("gpu", "?"), data.get("hardware", "?")
    if isinstance(data, dict) and data.get("records"):                       # measure_baselines
        meta = data.get("meta", {})
        for op in dict.fromkeys(r["op"] for r in data["records"]):
            for sid, impls in by_shape(data["records"], op).items():
                seed = impls.get("seed") or {}
                seed = {**seed, "t_floor_us": seed.get("t_floor_us") or meta.get("floor_us")}
                t = seed.get("t_us") if not seed.get("error") else None
                counted = {n: r for n, r in impls.items() if not r.get("error")}
                name, tb = best(counted, "baseline")
                out.append({"op": op, "shape": sid, "t_seed": t, "best": name, "t_best": tb,
                            "attainment": record_attainment(seed) if t else None, "paired": paired(counted)})
        return out, meta.get("env", {}).get("gpu", "?"), meta.get("hardware", "?")
    raise NoRecords(f"{path}: holds no rows of new_ops.json nor records of records.json")


def paired(impls: dict) -> dict | None:
    """The sign-test interval of the best baseline's time over the seed's, round by round (measure_baselines
    --rounds), or None without enough paired rounds: then one timing judges the shape, within NOISE undecided."""
    _, rs = paired_ratios(impls)
    ci = median_interval(rs) if rs else None
    return None if ci is None else {"lo": ci[0], "hi": ci[1], "coverage": ci[2], "rounds": len(rs)}


def operator_status(op: str, shapes: list[dict]) -> dict:
    att = [s["attainment"] for s in shapes if s["attainment"] is not None]
    compared = [s for s in shapes if s["t_seed"] and s["t_best"]]
    losses = [s for s in compared if s["t_best"] < s["t_seed"]]
    worst = max(compared, key=lambda s: s["t_seed"] / s["t_best"], default=None)
    median = statistics.median(att) if att else None
    untimed = [s["shape"] for s in shapes if not s["t_seed"]]
    # A: no baseline anywhere leaves nothing to beat (None); a seed that failed a shape cannot meet it.
    a_met = None if not any(s["t_best"] for s in shapes) else not losses and not untimed
    lost = [loss(s) for s in losses]
    # A as the timings can decide it: a loss inside the noise of one timing, or whose paired rounds' interval
    # holds 1.0, neither meets nor misses
    a_verdict = ("n/a" if a_met is None else "met" if a_met else
                 "missed" if untimed or any(x["decided"] for x in lost) else "undecided")
    return {"op": op, "shapes": len(shapes), "median_attainment": median,
            "b_met": None if median is None else median >= B_BAR,
            "compared": len(compared), "losses": lost, "seed_untimed": untimed,
            "worst": loss(worst) if worst else None, "a_met": a_met, "a_verdict": a_verdict}


def loss(s: dict) -> dict:
    ratio = s["t_seed"] / s["t_best"]
    rounds = s.get("paired")
    # rounds: decided when the whole interval of best / seed lies below 1 (the baseline faster in the rounds)
    decided = rounds["hi"] < 1.0 if rounds else abs(ratio - 1) >= NOISE
    return {"op": s["op"], "shape": s["shape"], "t_seed_us": s["t_seed"], "baseline": s["best"],
            "t_baseline_us": s["t_best"], "ratio": ratio, "within_noise": abs(ratio - 1) < NOISE,
            "paired": rounds, "decided": decided}


def status(files: list[Path]) -> dict:
    merged: dict[tuple[str, str], dict] = {}
    gpus, hardware = [], []
    for f in files:
        entries, gpu, hw = shapes_of(f)
        if not entries:
            raise NoRecords(f"{f}: holds no measured shape")
        gpus.append(gpu)
        hardware.append(hw)
        for e in entries:
            merged.pop((e["op"], e["shape"]), None)      # the later file wins, and takes the later place
            merged[(e["op"], e["shape"])] = e
    ops = list(dict.fromkeys(op for op, _ in merged))
    per_op = [operator_status(op, [e for (o, _), e in merged.items() if o == op]) for op in ops]
    medians = [o["median_attainment"] for o in per_op if o["median_attainment"] is not None]
    return {"sources": [str(f) for f in files], "gpus": list(dict.fromkeys(gpus)),
            "hardware": list(dict.fromkeys(hardware)), "b_bar": B_BAR, "operators": per_op,
            "suite": {"operators": len(per_op), "a_met": sum(bool(o["a_met"]) for o in per_op),
                      "b_met": sum(bool(o["b_met"]) for o in per_op),
                      "both_met": sum(bool(o["a_met"] and o["b_met"]) for o in per_op),
                      "median_of_medians": statistics.median(medians) if medians else None},
            "losses": [x for o in per_op for x in o["losses"]]}


def _verdict(met: bool | None) -> str:
    return "n/a" if met is None else "**met**" if met else "missed"


def _ratio(x: dict) -> str:
    p = x["paired"]
    if p:
        return (f"{x['ratio']:.3f}x; paired rounds: best / seed in [{p['lo']:.3f}, {p['hi']:.3f}] at "
                f"{p['coverage']:.0%}, {p['rounds']} rounds: {'decided' if x['decided'] else 'undecided'}")
    return f"{x['ratio']:.3f}x" + (f" (within {NOISE:.0%}: one timing cannot decide)" if x["within_noise"] else "")


def render(st: dict) -> str:
    su = st["suite"]
    lines = ["# Suite status against issue 15's targets", "",
             f"GPU: {', '.join(st['gpus'])}; ceilings: {', '.join(st['hardware'])} datasheet. Sources: "
             + ", ".join(f"`{s}`" for s in st["sources"]) + " (a later source wins a shape measured twice).", "",
             f"A: every hot shape's seed time <= the best correct baseline's (same contract). B: median seed "
             f"attainment >= {st['b_bar']}. Ratio: seed time / best baseline time (above 1: the baseline is faster).",
             "", "| operator | hot shapes | median seed attainment | target B | shapes where the best baseline is "
             "faster | worst ratio (shape, baseline) | target A |", "|---|---|---|---|---|---|---|"]
    for o in st["operators"]:
        w = o["worst"]
        worst = f"{w['ratio']:.3f}x at {w['shape']} ({w['baseline']})" if w else "-"
        a = ({"met": "**met**"}.get(o["a_verdict"], o["a_verdict"]) +
             (f" (seed untimed: {', '.join(o['seed_untimed'])})" if o["seed_untimed"] else ""))
        lines.append(f"| {o['op']} | {o['shapes']} | {fmt(o['median_attainment'], '.3f')} | {_verdict(o['b_met'])} | "
                     f"{len(o['losses'])} of {o['compared']} | {worst} | {a} |")
    undecided = sum(o["a_verdict"] == "undecided" for o in st["operators"])
    lines += ["", f"- operators meeting A: {su['a_met']} of {su['operators']} ({undecided} more undecided: every "
              f"loss within the timings' noise); B: {su['b_met']}; both: {su['both_met']}",
              f"- median over operators of their median seed attainment: {fmt(su['median_of_medians'], '.3f')}",
              f"- shapes where a baseline beats the seed: {len(st['losses'])}", ""]
    lines += [f"  - {x['op']} {x['shape']}: seed {x['t_seed_us']:.2f} us, {x['baseline']} {x['t_baseline_us']:.2f} us, "
              f"{_ratio(x)}" for x in st["losses"]]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Where one (operator, shape) is in "
                                 "several inputs, the later PATH on the command line wins.")
    ap.add_argument("paths", nargs="+", type=Path, help="new_ops.json, records.json, or folders holding them")
    ap.add_argument("--out", type=Path, help="write the markdown here instead of stdout")
    ap.add_argument("--json", type=Path, help="also write the same data as JSON here")
    args = ap.parse_args(argv)
    try:
        st = status(input_files(args.paths))
    except NoRecords as exc:
        print(f"suite_status: {exc}", file=sys.stderr)
        return 2
    text = render(st)
    if args.out:
        args.out.write_text(text)
    else:
        print(text, end="")
    if args.json:
        args.json.write_text(json.dumps(st, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
