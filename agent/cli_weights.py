"""`aka weights --from-trace` and `aka trace`: importance weights from real profiles.

    aka trace --model llama-3.1-8b --phase decode --tokens 64 --out traces/llama-decode-64.json
    aka weights --from-trace traces/*.json --map configs/kernel_map.yaml --out weights.json
    aka bench --all --weights weights.json          # also: aka bench --op, optimize, report, nightly

`aka weights` prints each operator's share of the traced GPU time and the unmapped share with its
largest kernels (never dropped: add rules to the map for them). `aka trace` also prints the traced
shares beside the analytic ones of benchmarks/weights.py for the same model, phase and token count.
Exit codes: 0 written, 2 usage error (unreadable trace or map, unknown model).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

DEFAULT_MAP = Path(__file__).resolve().parent.parent / "configs" / "kernel_map.yaml"


def _usage(message: str) -> typer.Exit:
    from agent.cli import usage_error     # the one usage-error helper (exit 2)
    return usage_error(message)


def load_option(path: Optional[Path]):
    """`--weights FILE` through the one loader (benchmarks/weights_file.py); None without the option; a bad
    file is a usage error (exit 2) that names the file, the value and the fix."""
    if path is None:
        return None
    from benchmarks.weights_file import load_weights_file
    from benchmarks.weights_trace import WeightsFileError
    try:
        return load_weights_file(path)
    except (WeightsFileError, OSError) as e:
        raise _usage(str(e))


def reweigh_option(path: Optional[Path], op: str, shapes, known=None):
    """`shapes` weighed by `--weights FILE` (unchanged without it); a note goes to stderr when the file has
    no shapes of `op`."""
    file = load_option(path)
    if file is None:
        return tuple(shapes)
    from benchmarks.weights_trace import WeightsFileError
    try:
        out = file.reweigh(op, shapes, known)
    except WeightsFileError as e:
        raise _usage(str(e))
    if file.note(op):
        typer.secho(f"note: {file.note(op)}", fg="yellow", err=True)
    return out


def op_shares(w, mapped_only: bool = False) -> dict[str, float]:
    out: dict[str, float] = {}
    for e in w.entries:
        out[e["op"]] = out.get(e["op"], 0.0) + e["weight"]
    if mapped_only:
        out.pop("unmapped", None)
        total = sum(out.values())
        out = {k: v / total for k, v in out.items()} if total else out
    return out


def analytic_shares(model: str, phase: str, tokens: int) -> dict[str, float]:
    """benchmarks/weights.py's modelled shares for one model at TP1, one phase, one token count."""
    from benchmarks.registry import list_operators
    from benchmarks.weights import compute, load_mix
    mix, models = load_mix()
    one = {**mix, "models": {model: {"tp": 1, "share": 1.0}}, "phases": {phase: {"share": 1.0, "tokens": {tokens: 1.0}}}}
    by_op = compute(one, models, list_operators())
    return {op: sum(r.weight for r in rows) for op, rows in by_op.items()}


def weights(from_trace: List[Path] = typer.Option(..., "--from-trace", help="torch.profiler Chrome trace(s)"),
            map_file: Path = typer.Option(DEFAULT_MAP, "--map", help="kernel name -> operator rules"),
            phase: Optional[str] = typer.Option(None, "--phase", help="prefill | decode, for traces `aka trace` "
                                                "did not write"),
            out: Path = typer.Option(Path("weights.json"), "--out", help="the weights file to write")):
    """Sum traced GPU time per (operator, shape, phase), normalize, write a weights file for --weights."""
    from benchmarks.weights_trace import TraceError, load_map, weights_from_traces
    try:
        w = weights_from_traces(list(from_trace), load_map(map_file), phase)
    except TraceError as e:
        raise _usage(str(e))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(w.to_json(), indent=1))
    if w.device != "gpu":
        typer.secho(f"note: {w.device} trace(s): no GPU kernels, so CPU operators' self time was used; these are "
                    f"not GPU weights", fg="yellow", err=True)
    for op, share in sorted(op_shares(w).items(), key=lambda kv: -kv[1]):
        typer.echo(f"{op:14s} {share:7.3f}")
    typer.echo(f"unmapped: {w.unmapped_share:.3f} of {w.total_us:.0f} us; largest: "
               + ", ".join(f"{u['kernel'][:50]} {u['time_us']:.0f} us" for u in w.unmapped[:5]))
    typer.echo(f"wrote {out} ({len(w.entries)} (operator, shape, phase) entries)")


def trace(model: str = typer.Option(..., "--model", help="a model of configs/models.yaml"),
          phase: str = typer.Option(..., "--phase", help="prefill | decode"),
          tokens: int = typer.Option(..., "--tokens", help="prefill: prompt tokens; decode: sequences in the batch"),
          out: Optional[Path] = typer.Option(None, "--out", help="trace file (default traces/MODEL-PHASE-T.json)"),
          layers: Optional[int] = typer.Option(None, "--layers", help="build only this many decoder layers"),
          context: int = typer.Option(512, "--context", help="decode: tokens already in each sequence's cache"),
          map_file: Path = typer.Option(DEFAULT_MAP, "--map", help="rules for the comparison printed at the end")):
    """Run a model with random weights under torch.profiler (GPU) and write a Chrome trace."""
    from agent.trace_model import TraceSetupError, trace_model
    from benchmarks.weights_trace import TraceError, load_map, weights_from_traces
    out = out or Path("traces") / f"{model}-{phase}-{tokens}.json"
    try:
        meta = trace_model(model, phase, tokens, out, layers=layers, context=context)
    except (TraceSetupError, ImportError) as e:
        raise _usage(str(e))
    typer.echo(f"wrote {out}: {json.dumps(meta)}")
    try:
        w = weights_from_traces([out], load_map(map_file))
    except TraceError as e:
        raise _usage(str(e))
    traced, analytic = op_shares(w, mapped_only=True), analytic_shares(model, phase, tokens)
    typer.echo(f"{'operator':14s} {'traced':>8s} {'analytic':>9s}   (shares of the aka operators' time; "
               f"unmapped {w.unmapped_share:.3f} of all traced time)")
    for op in sorted(set(traced) | set(analytic)):
        typer.echo(f"{op:14s} {traced.get(op, 0.0):8.3f} {analytic.get(op, 0.0):9.3f}")
