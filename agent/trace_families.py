"""Trace three model families on one GPU and compare traced with analytic operator shares (one process).

    python -m agent.trace_families --out results/traces      # H200: about 3-5 minutes

Families: a dense Llama (all 32 layers), a Qwen3 MoE and Mixtral (8 layers each: the full models do not fit
with random weights beside their activations); decode (64 sequences, 512 tokens of context) and prefill
(4096 tokens) each. Writes the traces, weights.json (all six traces together) and comparison.json; prints
per model and phase each aka operator's share of the operators' traced time beside benchmarks/weights.py's.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

RUNS = (("llama-3.1-8b", None), ("qwen3-30b-a3b", 8), ("mixtral-8x7b", 8))
PHASES = (("decode", 64), ("prefill", 4096))


def main(argv: list[str] | None = None) -> int:
    from agent.cli_weights import DEFAULT_MAP, analytic_shares, op_shares
    from agent.trace_model import trace_model
    from benchmarks.weights_trace import load_map, weights_from_traces
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--map", type=Path, default=DEFAULT_MAP)
    args = ap.parse_args(argv)
    rules, traces, rows = load_map(args.map), [], []
    for model, layers in RUNS:
        for phase, tokens in PHASES:
            path = args.out / f"{model}-{phase}-{tokens}.json"
            meta = trace_model(model, phase, tokens, path, layers=layers)
            traces.append(path)
            w = weights_from_traces([path], rules)
            traced, analytic = op_shares(w, mapped_only=True), analytic_shares(model, phase, tokens)
            for op in sorted(set(traced) | set(analytic)):
                rows.append({"model": model, "layers": meta["layers"], "phase": phase, "tokens": tokens, "op": op,
                             "traced": traced.get(op, 0.0), "analytic": analytic.get(op, 0.0),
                             "unmapped_share": w.unmapped_share,
                             "top_unmapped": [u["kernel"] for u in w.unmapped[:3]]})
            print(f"traced {path} ({w.total_us:.0f} us, unmapped {w.unmapped_share:.3f})", flush=True)
    combined = weights_from_traces(traces, rules)
    (args.out / "weights.json").write_text(json.dumps(combined.to_json(), indent=1))
    (args.out / "comparison.json").write_text(json.dumps(rows, indent=1))
    print(f"{'model':16s} {'phase':8s} {'op':13s} {'traced':>7s} {'analytic':>8s} {'unmapped':>8s}")
    for r in rows:
        print(f"{r['model']:16s} {r['phase']:8s} {r['op']:13s} {r['traced']:7.3f} {r['analytic']:8.3f} "
              f"{r['unmapped_share']:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
