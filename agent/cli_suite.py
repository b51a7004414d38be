"""`aka bench --all`: score every operator of the registry through the sandbox and print S_agg.

    aka bench --all                                   # every operator's seed, hot shapes
    aka bench --all --kernels last --kernels rms_norm-2026   # the final kernels of these runs, seeds elsewhere
    aka bench --all --kernels exported/               # <op>.py or <op>/best.py files in a folder
    aka bench --all --baseline compile --json suite_compile.json   # what users run instead
    aka bench --all --ops rms_norm,silu_and_mul --weights traced.json

Exit codes: 0 every operator's kernel accepted, 1 one or more rejected (the table names the shapes),
2 usage error. Without a GPU, kernels run under Triton's interpreter: correctness is real, nothing is scored.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer


def _usage(message: str) -> typer.Exit:
    from agent.cli import usage_error     # the one usage-error helper (exit 2)
    return usage_error(message)


def suite_request(cfg, op: str, choice, shapes, hardware, counters: bool = False):
    """The sandbox request for one operator of the suite, built from the config as `aka bench` builds its own."""
    import dataclasses
    from sandbox import EvalRequest
    settings = dataclasses.replace(cfg.sandbox, counters=counters or cfg.sandbox.counters)
    return EvalRequest(op=op, source=choice.source, shapes=tuple(shapes), hardware=hardware, settings=settings,
                       baseline=choice.baseline)


def _fmt(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def suite_table(score, title: str):
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text
    table = Table(title=escape(title))
    for col in ("operator", "kernel", "w_i", "S_i", f"S_i ({score.other or 'other'})", "verdict", "failed shapes"):
        table.add_column(col, justify="right" if col in ("w_i", "S_i") or col.startswith("S_i (") else "left",
                         overflow="fold")
    for o in score.operators:
        failed = "; ".join(f"{s}: {e[:60]}" for s, e in o.failed_shapes) or (
            "" if o.verdict == "accepted" else f"{o.failed_stage}: {(o.reasons or ('',))[0][:80]}")
        table.add_row(*(Text(c) for c in (o.op, o.kernel, _fmt(o.weight), _fmt(o.s_i), _fmt(o.s_i_other),
                                          o.verdict, failed)))
    return table


def bench_all(shape_set: str = "hot", kernels: List[str] = (), baseline: Optional[str] = None,
              json_out: Optional[Path] = None, only: List[str] = (), hardware: Optional[str] = None,
              weights_file: Optional[Path] = None, counters: bool = False, config: Optional[Path] = None,
              override: List[str] = ()) -> None:
    from agent.config import ConfigError, load_config, use_interpreter_if_no_gpu
    interpreter = use_interpreter_if_no_gpu()     # before anything imports triton
    from agent.cli import resolve_hardware
    from agent.report import INTERPRETER_NOTE, console as make_console
    from agent.suite import SuiteError, KernelChoice, pick_operators, resolve_kernels, score_suite, shape_set_weights
    from benchmarks.registry import list_operators, load_operator
    from sandbox import evaluate
    from sandbox.evaluation import BASELINES

    try:
        cfg = load_config(config, list(override))
    except ConfigError as e:
        raise _usage(str(e))
    if baseline is not None and baseline not in BASELINES:
        raise _usage(f"--baseline {baseline!r}: choose one of {', '.join(BASELINES)}")
    if baseline and kernels:
        raise _usage("--baseline scores the PyTorch reference of every operator; drop --kernels, or drop --baseline")
    try:
        ops = pick_operators(list_operators(), list(only))
        specs = {op: load_operator(op) for op in ops}
        chosen_shapes = {op: spec.select(shape_set) for op, spec in specs.items()}
    except (SuiteError, ValueError) as e:
        raise _usage(str(e))
    empty = [op for op, shapes in chosen_shapes.items() if not shapes]
    ops = [op for op in ops if op not in empty]
    if not ops:
        raise _usage(f"no operator has shapes in set {shape_set!r}; `aka shapes --op OP` lists them")
    raw_weights, weights_source = shape_set_weights({op: specs[op] for op in ops}, shape_set), "shapes.yaml weights"
    if weights_file is not None:
        from agent.cli_weights import load_option
        raw_weights, weights_source = load_option(weights_file).operator_weights(shape_set, ops), str(weights_file)
    if baseline:
        choices = {op: KernelChoice(op, f"baseline {baseline}", "", baseline) for op in ops}
    else:
        audit = None
        if kernels and cfg.audit_db.is_file():
            from agent.audit import Audit
            audit = Audit(cfg.audit_db)
        try:
            choices = resolve_kernels(list(kernels), ops, {op: specs[op].seed_path for op in ops}, audit)
        except SuiteError as e:
            raise _usage(str(e))
        finally:
            if audit is not None:
                audit.close()
    primary, other = resolve_hardware(cfg, hardware)
    console = make_console()
    if interpreter:
        typer.secho(f"note: {INTERPRETER_NOTE}; S_i and S_agg are not scored", fg="yellow", err=True)
    for op in empty:
        console.print(f"{op}: no shapes in set {shape_set!r}; left out of S_agg", markup=False)
    results = {}
    for op in ops:
        console.print(f"{op}: scoring {choices[op].label} on {len(chosen_shapes[op])} shape(s) "
                      f"[{'interpreter' if interpreter else 'GPU'}]", highlight=False, markup=False)
        try:
            results[op] = evaluate(suite_request(cfg, op, choices[op], chosen_shapes[op], primary, counters))
        except ValueError as e:   # e.g. a baseline the sandbox has no recipe for with this operator
            from sandbox.verdict import EvalResult
            results[op] = EvalResult(op=op, failed_stage="timing", reasons=[f"not evaluated: {e}"],
                                     interpreter=interpreter)
    try:
        score = score_suite(shape_set, choices, results, raw_weights, primary, other, weights_source)
    except SuiteError as e:
        raise _usage(str(e))
    what = f"baseline {baseline}" if baseline else "kernels"
    console.print(suite_table(score, f"suite [{shape_set}] {what}; ceilings {score.primary}; "
                                     f"w_i from {weights_source}"))
    print_aggregate(console, score, primary, other)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(score.to_json(), indent=2, default=str))
        console.print(f"wrote {json_out}")
    raise typer.Exit(0 if all(o.verdict == "accepted" for o in score.operators) else 1)


def print_aggregate(console, score, primary, other) -> None:
    if score.interpreter:
        console.print("S_agg: not scored (interpreter timings are not scores); correctness above is real")
        return
    console.print(f"S_agg = {_fmt(score.s_agg)} against {score.primary} ceilings "
                  f"({primary.bandwidth_tbs:.2f} TB/s, bf16 {primary.peaks_tflops.get('bf16', 0):.0f} TFLOP/s)")
    if other is None:
        console.print("S_agg against calibrated ceilings: none saved for this GPU (`aka calibrate` measures them)")
    else:
        console.print(f"S_agg = {_fmt(score.s_agg_other)} against {score.other} ceilings "
                      f"({other.bandwidth_tbs:.2f} TB/s, bf16 {other.peaks_tflops.get('bf16', 0):.0f} TFLOP/s)")


def require_all(all_ops: bool, op: Optional[str], kernel: Optional[Path]) -> None:
    """`aka bench` needs exactly one of --op and --all; --kernel is for one operator."""
    if not all_ops:
        raise _usage("--op is required (aka ops lists the operators), or --all to score every operator")
    if op:
        raise _usage(f"--op {op} and --all: pick one (--all --ops {op} scores only {op} as a suite)")
    if kernel:
        raise _usage("--kernel names one operator's file; with --all use --kernels DIR|RUN")
