"""Markdown for agent/studies/measure_baselines.py: pure functions of its JSON records (CPU-testable).

Ratios are the best baseline's time over ours, per shape: above 1.0 ours is faster. Attainment is
min(1, max(T_roof, T_floor) / T) against the datasheet ceilings, as the score computes it.
"""
from __future__ import annotations

import datetime
import math
import statistics
from typing import Callable

METHOD = ("Timing: sandbox.timing.time_call, the score's own timer: CUDA-graph replay of 10 calls, L2 flushed "
          "(256 MiB write) before every call, up to 4 input sets rotated (1 GiB cap), median over replays. A call "
          "that syncs with the host cannot be captured and is timed with eager launches (marked `e`: host time "
          "included). Every implementation was checked against the operator's reference on the same inputs "
          "before it was timed; one that failed is listed, never timed. torch.compile is compiled per shape with "
          "static shapes (`dynamic=False`), as `aka bench --baseline compile` now does.")


def fmt(v, spec=".2f") -> str:
    return "-" if v is None else format(v, spec)


def attainment(rec: dict) -> float | None:
    t = rec.get("t_us")
    if not t:
        return None
    return min(1.0, max(rec.get("t_roof_us") or 0.0, rec.get("t_floor_us") or 0.0) / t)


def by_shape(records: list[dict], op: str) -> dict[str, dict[str, dict]]:
    """shape id -> impl -> record, in the order shapes were measured."""
    out: dict[str, dict[str, dict]] = {}
    for r in records:
        if r["op"] == op:
            out.setdefault(r["shape"], {})[r["impl"]] = r
    return out


def best(impls: dict[str, dict], kind: str) -> tuple[str | None, float | None]:
    timed = [(r["t_us"], name) for name, r in impls.items() if r["kind"] == kind and r.get("t_us")]
    if not timed:
        return None, None
    t, name = min(timed)
    return name, t


def best_ours(impls: dict[str, dict]) -> tuple[str | None, float | None]:
    """The fastest correct seed configuration: the seed or one of its variants."""
    timed = [(r["t_us"], n) for n, r in impls.items() if r["kind"] in ("seed", "variant") and r.get("t_us")]
    return (min(timed)[1], min(timed)[0]) if timed else (None, None)


def ratios(shapes: dict[str, dict[str, dict]], ours: Callable[[dict], float | None]) -> dict[str, float]:
    out = {}
    for sid, impls in shapes.items():
        _, tb = best(impls, "baseline")
        t = ours(impls)
        if tb and t:
            out[sid] = tb / t
    return out


def _t(r: dict | None) -> str:
    if not r:
        return "-"
    if r.get("t_us") is None:
        return "fail" if r.get("error") else ("ok" if r.get("rel_l2") is not None else "-")
    return fmt(r["t_us"]) + (" e" if r.get("mode") == "eager" else "")


def _dims(r: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in r["dims"].items())


# ---- targets of issue 12 (per operator: a list of (what, met or None when unmeasured, detail)) -------------

def _seed_t(impls):
    return (impls.get("seed") or {}).get("t_us")


def _best_t(impls):
    return best_ours(impls)[1]


def targets(op: str, shapes: dict[str, dict[str, dict]], ours=_seed_t) -> list[tuple[str, bool | None, str]]:
    rs = ratios(shapes, ours)
    out = []

    def worst(ids, bar, what):
        vals = {s: rs[s] for s in ids if s in rs}
        if not vals:
            out.append((what, None, "not measured"))
            return
        s_min = min(vals, key=vals.get)
        out.append((what, vals[s_min] >= bar, f"min {vals[s_min]:.2f}x at {s_min} over {len(vals)} shapes"))

    dims = {s: next(iter(impls.values()))["dims"] for s, impls in shapes.items()}
    if op == "rms_norm":
        worst(list(shapes), 1.02, ">= 1.02x the best of torch.compile and Liger on every hot shape")
    elif op == "silu_and_mul":
        worst(list(shapes), 1.0, ">= 1.0x the best baseline on every hot shape")
        decode = [s for s in shapes if dims[s].get("T", 0) <= 256]
        over = []
        for s in decode:
            rec, t = shapes[s].get("seed") or {}, ours(shapes[s])
            if t and rec.get("t_floor_us"):
                over.append((t / rec["t_floor_us"], s))
        if over:
            m, s = max(over)
            out.append(("decode shapes (T <= 256) within 1.5x of the latency floor", m <= 1.5, f"worst {m:.2f}x at {s}"))
    elif op == "gemm":
        worst([s for s in shapes if dims[s]["M"] >= 256], 1.0, ">= 1.0x cuBLAS at M >= 256")
        worst([s for s in shapes if dims[s]["M"] <= 64], 1.05, ">= 1.05x cuBLAS at M <= 64")
    elif op == "fused_moe":
        att = {}
        for s, impls in shapes.items():
            t, rec = ours(impls), impls.get("seed") or {}
            if t:
                att[s] = attainment({**rec, "t_us": t})
        if att:
            si = statistics.median(att.values())
            out.append(("S_i >= 0.80 (datasheet)", si >= 0.80, f"S_i {si:.3f}"))
        big = [s for s in att if dims[s]["T"] == 4096]
        for s in big:
            out.append(("T=4096 prefill attainment >= 0.65", att[s] >= 0.65, f"{att[s]:.3f} at {s}"))
        small = [s for s in att if dims[s]["E"] == 128 and dims[s]["H"] == 4096 and dims[s]["T"] <= 256]
        if small:
            s = min(small, key=att.get)
            out.append(("E=128 H=4096 decode attainment >= 0.75", att[s] >= 0.75, f"min {att[s]:.3f} at {s}"))
    else:               # issue 15's operator suite: at or above every baseline, and a median attainment
        worst(list(shapes), 1.0, ">= 1.0x the best baseline on every hot shape")
        att = [attainment({**(impls.get("seed") or {}), "t_us": ours(impls)}) for impls in shapes.values()]
        att = [a for a in att if a is not None]
        if att:
            med = statistics.median(att)
            out.append((f"median attainment >= {SUITE_ATTAINMENT} (latency floor)", med >= SUITE_ATTAINMENT,
                        f"{med:.3f} over {len(att)} shapes"))
    return out


# ---- paired rounds: a ratio target decided with a confidence, not from one median -----------------------

PAIRED_CONFIDENCE = 0.9
RATIO_BARS = {"rms_norm": 1.02, "silu_and_mul": 1.0}        # the per-shape ratio targets of issue 12
SUITE_ATTAINMENT = 0.6      # issue 15: an operator's median attainment over its hot shapes


def ratio_bar(op: str, dims: dict) -> float | None:
    """The ratio target of one shape (best baseline's time over ours), or None where none is set: issue 12's
    (gemm >= 1.05x cuBLAS at M <= 64 and >= 1.0x at M >= 256, fused_moe none), else issue 15's 1.0x."""
    if op == "gemm":
        m = dims.get("M", 0)
        return 1.05 if m <= 64 else 1.0 if m >= 256 else None
    if op == "fused_moe":
        return None
    return RATIO_BARS.get(op, 1.0)


def median_interval(values: list[float], confidence: float = PAIRED_CONFIDENCE) -> tuple[float, float, float] | None:
    """(lo, hi, coverage): the widest-inward order statistics [v_(i), v_(n+1-i)] that hold the median of the
    values' distribution with at least `confidence` (the sign test's interval: no assumption on the shape of
    the noise, only that the samples are independent), or None when n samples cannot reach it (n < 5 at 0.9)."""
    v = sorted(values)
    n = len(v)
    best = None
    for i in range(1, n // 2 + 1):
        below = sum(math.comb(n, j) for j in range(i)) / 2 ** n          # P(Binomial(n, 1/2) <= i - 1)
        coverage = 1.0 - 2.0 * below
        if coverage < confidence:
            break
        best = (v[i - 1], v[n - i], coverage)
    return best


def paired_ratios(impls: dict[str, dict]) -> tuple[str | None, list[float] | None]:
    """Round by round, the best baseline's time over the seed's (the baseline with the lowest median; both timed
    in the same round-robin round, so a drift of the machine moves both). [] when either side has no rounds;
    None when their rounds cannot be paired (a round that failed or fell back to eager timing was dropped from
    one side, and which one is not recorded)."""
    name, _ = best(impls, "baseline")
    seed = impls.get("seed") or {}
    a, b = seed.get("rounds_us") or [], ((impls.get(name) or {}).get("rounds_us") or []) if name else []
    if len(a) < 2 or len(b) < 2:
        return name, []
    if len(a) != len(b):
        return name, None
    return name, [tb / ts for ts, tb in zip(a, b)]


def paired_verdicts(op: str, shapes: dict[str, dict[str, dict]]) -> dict[str, tuple[float, str, str]] | None:
    """shape -> (bar, verdict, detail) for the shapes with a ratio target (ratio_bar): `met` when the interval's low
    end is at or above the bar, `missed` when its high end is below it, `undecided` when it holds the bar, `one
    timing` when the shape has no rounds (its seed took longer than --rounds-max-us); None when there is none."""
    out = {}
    for sid, impls in shapes.items():
        bar = ratio_bar(op, next(iter(impls.values()))["dims"])
        if bar is None:
            continue
        name, rs = paired_ratios(impls)
        if rs is None:
            out[sid] = (bar, "undecided", "rounds dropped on one side: not paired")
            continue
        ci = median_interval(rs) if rs else None
        if ci is None:
            out[sid] = (bar, "undecided", f"{len(rs)} rounds: too few for the interval") if rs else (
                bar, "one timing", "no rounds")
            continue
        lo, hi, cov = ci
        verdict = "met" if lo >= bar else "missed" if hi < bar else "undecided"
        out[sid] = (bar, verdict, f"{name}: median {statistics.median(rs):.3f}x, [{lo:.3f}, {hi:.3f}] at {cov:.0%}, "
                                  f"{len(rs)} rounds")
    return out or None


def paired_lines(op: str, shapes: dict[str, dict[str, dict]]) -> list[str]:
    per = paired_verdicts(op, shapes)
    if per is None or all(v == "one timing" for _, v, _ in per.values()):
        return []
    counts = {k: [s for s, (_, v, _) in per.items() if v == k] for k in ("met", "missed", "undecided", "one timing")}
    overall = "missed" if counts["missed"] else "undecided" if counts["undecided"] else "met"
    distinct = sorted({b for b, _, _ in per.values()})
    bars = "/".join(f"{b:g}x" for b in distinct)
    lines = [f"- the {bars} target from paired rounds (each round's best-baseline time over the seed's, in the same "
             f"round; a sign-test interval of the median ratio at >= {PAIRED_CONFIDENCE:.0%}; shapes with one timing "
             f"are judged by it in the line above): **{overall}** on the shapes with rounds: "
             + "; ".join(f"{k} on {len(v)}" for k, v in counts.items() if v)]
    lines += [f"  - {sid}: {v}" + (f" at {b:g}x" if len(distinct) > 1 else "") + f" ({d})"
              for sid, (b, v, d) in per.items()]
    return lines


# ---- rendering -----------------------------------------------------------------------------------------

def op_section(op: str, shapes: dict[str, dict[str, dict]]) -> list[str]:
    if not shapes:
        return [f"## {op}", "", "no records", ""]
    names = list(next(iter(shapes.values())))
    base = [n for n in names if next(iter(shapes.values()))[n]["kind"] == "baseline"]
    variants = [n for n in names if next(iter(shapes.values()))[n]["kind"] == "variant"]
    lines = [f"## {op}", ""]
    r_seed, r_best = ratios(shapes, _seed_t), ratios(shapes, _best_t)
    att = [attainment(i["seed"]) for i in shapes.values() if i.get("seed") and attainment(i["seed"]) is not None]
    if r_seed:
        v = sorted(r_seed.values())
        lines.append(f"Best baseline / seed per shape: min {v[0]:.2f}, median {statistics.median(v):.2f}, "
                     f"max {v[-1]:.2f} (above 1.0 the seed is faster). S_i (seed, datasheet) = "
                     f"{statistics.median(att):.3f}." if att else "")
    if variants and r_best:
        v = sorted(r_best.values())
        lines.append(f"With the best seed variant per shape: min {v[0]:.2f}, median {statistics.median(v):.2f}, "
                     f"max {v[-1]:.2f}.")
    lines.append("")
    for what, met, detail in targets(op, shapes):
        lines.append(f"- target {what}: **{'met' if met else 'missed' if met is False else 'n/a'}** ({detail})")
    lines += paired_lines(op, shapes)
    if variants:
        for what, met, detail in targets(op, shapes, _best_t):
            lines.append(f"- with the best variant per shape, {what}: "
                         f"**{'met' if met else 'missed' if met is False else 'n/a'}** ({detail})")
    lines += ["", "| shape | dims | T_roof us | floor us | seed us | " + " | ".join(f"{b} us" for b in base) +
              " | best baseline | best / seed | seed attain |", "|---" * (8 + len(base)) + "|"]
    for sid, impls in shapes.items():
        seed = impls.get("seed") or next(iter(impls.values()))
        bname, _ = best(impls, "baseline")
        a = attainment(impls["seed"]) if impls.get("seed") else None
        lines.append(f"| {sid} | {_dims(seed)} | {fmt(seed.get('t_roof_us'))} | {fmt(seed.get('t_floor_us'))} | "
                     f"{_t(impls.get('seed'))} | " + " | ".join(_t(impls.get(b)) for b in base) +
                     f" | {bname or '-'} | {fmt(r_seed.get(sid))}x | {fmt(a)} |")
    if variants:
        lines += ["", "Seed variants (CONFIGS switches; us, fastest marked *):", "",
                  "| shape | seed | " + " | ".join(v.removeprefix("seed:") for v in variants) + " | best / fastest ours |",
                  "|---" * (3 + len(variants)) + "|"]
        for sid, impls in shapes.items():
            win, _ = best_ours(impls)
            cells = [(_t(impls.get(n)) + (" *" if n == win else "")) for n in ["seed"] + variants]
            lines.append(f"| {sid} | " + " | ".join(cells) + f" | {fmt(r_best.get(sid))}x |")
    failed = [(sid, n, r["error"]) for sid, impls in shapes.items() for n, r in impls.items()
              if r.get("error") and r.get("t_us") is None]
    if failed:
        lines += ["", "Not timed:", ""] + [f"- {n} at {sid}: {str(e)[:300]}" for sid, n, e in failed]
    return lines + [""]


def _floor_spread(meta: dict) -> str:
    """' (the median of N measurements, a-b us)' when the run took several (measure_baselines --floor-samples)."""
    samples = meta.get("floor_samples_us") or []
    if len(samples) < 2:
        return ""
    return f" (the median of {len(samples)} measurements, {min(samples):.2f}-{max(samples):.2f} us)"


def render(records: list[dict], meta: dict, hw) -> str:
    env = meta.get("env", {})
    clocks = env.get("clocks_mhz") or {}
    ops = list(dict.fromkeys(r["op"] for r in records))
    runs = meta.get("runs")     # several runs merged (merge_baseline_runs.py): each its command, floor and rounds
    lines = [f"# Seeds beside what users run ({datetime.date.today().isoformat()})", ""]
    lines += (["Runs, one process each on the same GPU (a later run's shapes replace an earlier's):", ""] + [
        f"- `{r.get('command', '?')}` ({fmt(r.get('wall_s'), '.0f')} s; latency floor {fmt(r.get('floor_us'))} us{_floor_spread(r)}; "
        f"{r.get('rounds') or 1} rounds up to {fmt(r.get('rounds_max_us'), 'g')} us)" for r in runs] + [""] if runs
        else [f"Command: `{meta.get('command', '?')}` ({fmt(meta.get('wall_s'), '.0f')} s)", ""])
    lines += [
             f"GPU: {env.get('gpu', '?')}, driver {env.get('driver', '?')}, SM clock {clocks.get('sm', '?')} MHz "
             f"(max {clocks.get('sm_max', '?')}) when read; torch {env.get('torch')}, triton {env.get('triton')}, "
             f"liger-kernel {env.get('liger-kernel')}, Python {env.get('python')}. Hot shapes, bf16.", "",
             f"Ceilings: {hw.name} datasheet ({hw.bandwidth_tbs} TB/s, bf16 {hw.peaks_tflops.get('bf16')} TFLOP/s); "
             + (f"latency floor {fmt(meta.get('floor_us'))} us measured in the same process{_floor_spread(meta)}."
                if not runs else
                "latency floor measured in each run's process (above)."), "", METHOD, ""]
    if (meta.get("rounds") or 1) > 1 and not runs:
        lines += [f"Rounds: every implementation of a shape whose seed took at most {fmt(meta.get('rounds_max_us'), 'g')} "
                  f"us was timed {meta['rounds']} times, round-robin over the implementations; its time is the "
                  f"median of its rounds' medians.", ""]
    if meta.get("dry_run"):
        lines += ["**Dry run on the CPU (Triton interpreter, scaled-down fp32 shapes): correctness only, no timing "
                  "(`ok`: checked against the reference). Liger's kernels do not run under the interpreter.**", ""]
    if meta.get("skipped_ops"):
        lines += [f"Not measured (time limit; `--resume` measures them): {', '.join(meta['skipped_ops'])}", ""]
    lines += ["## Summary", "", "| operator | best baselines | best / seed (min / median / max) | "
              "with best variant | targets met (seed) |", "|---|---|---|---|---|"]
    for op in ops:
        shapes = by_shape(records, op)
        rs, rb = sorted(ratios(shapes, _seed_t).values()), sorted(ratios(shapes, _best_t).values())
        anchors = sorted({best(i, "baseline")[0] for i in shapes.values() if best(i, "baseline")[0]})
        tg = targets(op, shapes)
        lines.append(f"| {op} | {', '.join(anchors) or '-'} | " +
                     (f"{rs[0]:.2f} / {statistics.median(rs):.2f} / {rs[-1]:.2f}" if rs else "-") + " | " +
                     (f"{rb[0]:.2f} / {statistics.median(rb):.2f} / {rb[-1]:.2f}" if rb else "-") +
                     f" | {sum(1 for t in tg if t[1])} of {len(tg)} |")
    lines.append("")
    for op in ops:
        lines += op_section(op, by_shape(records, op))
    return "\n".join(lines) + "\n"
