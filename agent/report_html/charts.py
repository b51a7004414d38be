"""The report's charts, drawn by matplotlib as inline SVG (text kept as text, so a page is searchable).

Each function takes a RunReport (or a list of them) and returns one SVG string. Charts say so in
their title when a run was under the interpreter (no timings): the points are verdicts, not scores.
"""
from __future__ import annotations

import io

SEED_COLOR, FINAL_COLOR, REJECT_COLOR, DROPOUT_COLOR = "#8c8c8c", "#1f77b4", "#d62728", "#ff7f0e"
BOUND_MARKER = {"memory": "o", "compute": "^"}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")          # no display on servers and CI
    import matplotlib.pyplot as plt
    return plt


def _svg(fig, salt: str) -> str:
    import matplotlib
    plt = _pyplot()
    buf = io.StringIO()
    # ids inside one page must not collide between charts; text stays text
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _rows(result):
    return {r.id: r for r in result.visible_shapes()} if result is not None else {}


def roofline_chart(run, chart_id: str) -> str:
    """Achieved FLOP/s against arithmetic intensity, under the roof min(peak, AI x bandwidth); seed hollow,
    final filled; memory-bound shapes as circles, compute-bound as triangles."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    bw = run.bandwidth_tbs * 1e12
    pts = [s for s in run.shapes if s.bytes > 0 and s.flops > 0]
    if pts and bw > 0:
        ai = [s.flops / s.bytes for s in pts]
        lo, hi = min(ai) / 4, max(ai) * 4
        peak = max(s.peak_flops for s in pts)
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, x * bw) / 1e12 for x in xs], color="black", lw=1.2, label="roof")
        for label, result, filled, color in (("seed", run.seed, False, SEED_COLOR), ("final", run.final, True, FINAL_COLOR)):
            rows = _rows(result)
            for bound, marker in BOUND_MARKER.items():
                sel = [(s.flops / s.bytes, s.flops / (rows[s.id].t_us * 1e-6) / 1e12) for s in pts
                       if s.bound == bound and s.id in rows and rows[s.id].t_us]
                if sel:
                    ax.scatter(*zip(*sel), marker=marker, s=46, label=f"{label}, {bound}-bound",
                               facecolors=color if filled else "none", edgecolors=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
    timed = any(r.t_us for r in _rows(run.final).values()) or any(r.t_us for r in _rows(run.seed).values())
    if not timed:
        ax.text(0.5, 0.5, "no timings (interpreter run)", transform=ax.transAxes, ha="center", color=REJECT_COLOR)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{run.op}: shapes against the roofline ({run.hardware.get('source', '?')} ceilings)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.25)
    return _svg(fig, chart_id)


def attainment_chart(run, chart_id: str) -> str:
    """Attainment per shape, seed beside final; compute-bound shapes hatched."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.4, 0.8 * len(run.shapes) + 2), 3.8))
    seed, final = _rows(run.seed), _rows(run.final)
    ids = [s.id for s in run.shapes]
    bound = {s.id: s.bound for s in run.shapes}
    for k, (label, rows, color) in enumerate((("seed", seed, SEED_COLOR), ("final", final, FINAL_COLOR))):
        vals = [(rows[i].attainment or 0.0) if i in rows else 0.0 for i in ids]
        bars = ax.bar([x + (k - 0.5) * 0.38 for x in range(len(ids))], vals, width=0.38, color=color, label=label)
        for bar, i in zip(bars, ids):
            if bound[i] == "compute":
                bar.set_hatch("//")
    ax.set_xticks(range(len(ids)))
    ax.set_xticklabels([f"{i}\n({bound[i][0]})" for i in ids], fontsize=7, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("attainment T_ref / T")
    title = f"{run.op}: before vs after, per shape (m = memory-, c = compute-bound)"
    if run.interpreter:
        title += " -- interpreter: not scored"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return _svg(fig, chart_id)


def history_chart(run, chart_id: str) -> str:
    """Score of every iteration; accepted candidates as stars on the incumbent's step line; dropouts as
    dashed vertical lines. Untimed runs put the verdicts on a strip at 0."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    timed = any(p.score is not None for p in run.iterations)
    y = [(p.score if p.score is not None else 0.0) for p in run.iterations]
    xs = [p.iteration for p in run.iterations]
    rej = [(x, v) for x, v, p in zip(xs, y, run.iterations) if not p.accepted]
    acc = [(x, v) for x, v, p in zip(xs, y, run.iterations) if p.accepted]
    if rej:
        ax.scatter(*zip(*rej), marker="x", color=REJECT_COLOR, label="rejected", s=30)
    if acc:
        ax.scatter(*zip(*acc), marker="*", color=FINAL_COLOR, label="accepted", s=110, zorder=3)
        steps = sorted(acc)
        ax.step([x for x, _ in steps] + [max(xs)], [v for _, v in steps] + [steps[-1][1]], where="post",
                color=FINAL_COLOR, lw=1, alpha=0.6, label="incumbent")
    for i, d in enumerate(run.dropouts):
        ax.axvline(d - 0.5, color=DROPOUT_COLOR, ls="--", lw=1, label="dropout" if i == 0 else None)
    ax.set_xlabel("iteration")
    ax.set_ylabel("weighted attainment" if timed else "(untimed: verdicts only)")
    ax.set_title(f"{run.op} {run.run_id}: score over iterations", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.grid(True, alpha=0.25)
    return _svg(fig, chart_id)


def suite_chart(runs, chart_id: str) -> str:
    """S_i seed vs final per run, for the index."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(runs) + 2), 3.6))
    names = [f"{r.op}\n{r.run_id[-7:]}" for r in runs]
    for k, (label, pick, color) in enumerate((("seed", lambda r: r.seed, SEED_COLOR),
                                              ("final", lambda r: r.final, FINAL_COLOR))):
        vals = [(pick(r).s_i or 0.0) if pick(r) is not None else 0.0 for r in runs]
        ax.bar([x + (k - 0.5) * 0.38 for x in range(len(runs))], vals, width=0.38, color=color, label=label)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels(names, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("S_i (median attainment)")
    ax.set_title("S_i per run, seed vs final" + (" -- interpreter runs are not scored"
                                                 if any(r.interpreter for r in runs) else ""), fontsize=9)
    ax.legend(fontsize=7)
    return _svg(fig, chart_id)
