"""aka: the command line. `aka optimize | bench | ops | shapes | calibrate | kb | audit`.

Exit codes: 0 accepted / success, 1 rejected (with reasons), 2 usage error (agent/cli_errors.py);
`aka optimize` adds 3 (fatal provider error) and 130/143 (interrupted).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from agent.cli_errors import check_writable, read_kernel, usage_error
from agent.config import ConfigError, load_config, use_interpreter_if_no_gpu

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="aka: profile-guided Triton kernel optimization with a scorer that cannot be gamed.")


def _operator(name: str):
    from benchmarks.registry import UnknownOperator, load_operator
    try:
        return load_operator(name)
    except UnknownOperator as e:
        raise usage_error(str(e))


def _config(config: Optional[Path], overrides: List[str]):
    try:
        return load_config(config, overrides)
    except ConfigError as e:
        raise usage_error(str(e))


def gpu_name_or_none() -> str | None:
    """Device 0's name as the driver gives it (nvidia-ml-py), or None on a machine without an NVIDIA driver."""
    try:
        import pynvml
        pynvml.nvmlInit()
        gpu = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
    except Exception:   # pynvml missing, NVMLError (no driver, RECIPES.md), or no device 0: a CPU machine
        return None
    return gpu if isinstance(gpu, str) else gpu.decode()


def resolve_hardware(cfg, name: str | None):
    """(primary, other): primary is what scores use (calibrated when asked and available), other the
    datasheet or calibrated counterpart for the side-by-side line; other may be None."""
    from benchmarks.hardware import list_hardware, load_calibrated, load_hardware, profile_key
    key = name or cfg.hardware
    if key == "auto":
        try:
            key = profile_key(gpu_name_or_none())
        except KeyError as exc:      # a GPU without a profile: never another card's ceilings in silence
            raise usage_error(exc.args[0]) from None
    if key not in list_hardware():
        raise usage_error(f"unknown hardware {key!r}; known: {', '.join(list_hardware())}")
    datasheet = load_hardware(key)
    calibrated = load_calibrated(cfg.home_dir, key)
    if cfg.ceilings == "calibrated" and calibrated is not None:
        return calibrated, datasheet
    return datasheet, calibrated


@app.command()
def ops():
    """List the operators with their signatures."""
    from rich.console import Console
    from rich.table import Table

    from benchmarks.registry import list_operators, load_operator
    table = Table(title="operators")
    for col in ("name", "signature", "shapes (hot/all)"):
        table.add_column(col)
    for name in list_operators():
        spec = load_operator(name)
        table.add_row(name, spec.signature, f"{len(spec.select('hot'))}/{len(spec.shapes)}")
    Console().print(table)


@app.command()
def shapes(op: str = typer.Option(..., "--op", help="operator name (aka ops lists them)"),
           shape_set: str = typer.Option("all", "--shape-set", help="hot | all | prefill | decode")):
    """List an operator's shapes: dims, dtype, phase, source model and weight within the set."""
    from rich.console import Console
    from rich.table import Table

    from benchmarks.scoring import normalize
    spec = _operator(op)
    try:
        chosen = spec.select(shape_set)
    except ValueError as e:
        raise usage_error(str(e))
    weights = normalize({s.id: s.weight for s in chosen})
    table = Table(title=f"{op} shapes ({shape_set}); weight = share of the set's GPU time")
    for col in ("id", "dims", "dtype", "phase", "hot", "weight", "source"):
        table.add_column(col)
    for s in chosen:
        table.add_row(s.id, s.label(), s.dtype, s.phase, "yes" if s.hot else "", f"{weights[s.id]:.3f}", s.source)
    Console().print(table)


@app.command()
def bench(op: Optional[str] = typer.Option(None, "--op", help="operator name (aka ops lists them); or --all"),
          kernel: Optional[Path] = typer.Option(None, "--kernel", help="candidate file (default: the operator's seed)"),
          shape_set: str = typer.Option("hot", "--shape-set", help="hot | all | prefill | decode"),
          hardware: Optional[str] = typer.Option(None, "--hardware", help="profile in configs/hardware (default: auto)"),
          json_out: Optional[Path] = typer.Option(None, "--json", help="write the verdict record here"),
          baseline: Optional[str] = typer.Option(None, "--baseline",
                                                 help="score what users run instead: eager | compile | liger | cublas"),
          require: List[str] = typer.Option([], "--require",
                                            help="reject kernels whose PTX/SASS lacks this feature: wgmma | tma | "
                                                 "cp.async | ldmatrix | mma (repeatable)"),
          counters: bool = typer.Option(False, "--counters", help="collect Nsight Compute counters (GPU with ncu)"),
          verbose: bool = typer.Option(False, "-v", "--verbose", help="print where the evaluation's wall time went"),
          config: Optional[Path] = typer.Option(None, "--config", help="YAML config file"),
          override: List[str] = typer.Option([], "-c", help="config override key.path=value"),
          all_ops: bool = typer.Option(False, "--all", help="score every operator and S_agg (agent/cli_suite.py)"),
          kernels: List[str] = typer.Option([], "--kernels", help="with --all: a folder of <op>.py, or a run id"),
          only: List[str] = typer.Option([], "--ops", help="with --all: only these operators (a,b)"),
          weights: Optional[Path] = typer.Option(None, "--weights", help="weights file (aka weights --from-trace): "
                                                 "the shapes' weights, and w_i with --all")):
    """Score a kernel (default: the operator's seed) on an operator's shapes through the sandbox."""
    if all_ops or not op:
        from agent.cli_suite import bench_all, require_all
        require_all(all_ops, op, kernel)
        return bench_all(shape_set, kernels, baseline, json_out, only, hardware, weights, counters, config, override)
    interpreter = use_interpreter_if_no_gpu()
    cfg = _config(config, override)
    spec = _operator(op)
    from sandbox.baselines import unavailable
    from sandbox.compile_child import FEATURES
    if baseline and unavailable(spec.module, baseline, op):
        raise usage_error(unavailable(spec.module, baseline, op))
    if baseline and kernel:
        raise usage_error("--baseline scores what users run instead of a kernel; drop --kernel, or drop --baseline")
    unknown = [f for f in require if f not in FEATURES]
    if unknown:
        raise usage_error(f"--require {', '.join(unknown)}: not a feature the compile gate reads; "
                          f"choose from {', '.join(FEATURES)}")
    if require and baseline:
        raise usage_error("--require checks a Triton kernel's compiled code; baselines are not compiled by the gate")
    try:
        chosen = spec.select(shape_set)
    except ValueError as e:
        raise usage_error(str(e))
    if not chosen:
        raise usage_error(f"{op} has no shapes in set {shape_set!r}; aka shapes --op {op} lists them")
    from agent.cli_weights import reweigh_option
    chosen = reweigh_option(weights, op, chosen, spec.shapes)
    path = Path(kernel) if kernel else Path(spec.seed_path)
    source = "" if baseline else read_kernel(path, "--kernel")
    if json_out is not None:
        check_writable(json_out, "--json")      # now, not after a minute of evaluation
    primary, other = resolve_hardware(cfg, hardware)
    if interpreter:
        typer.secho(f"note: {__import__('agent.report', fromlist=['x']).INTERPRETER_NOTE}", fg="yellow", err=True)

    from agent.progress import StageProgress
    from agent.report import console as make_console, rescore, shape_table
    from sandbox import EvalRequest, evaluate
    settings = dataclasses.replace(cfg.sandbox, counters=counters or cfg.sandbox.counters,
                                   require_features=tuple(dict.fromkeys((*cfg.sandbox.require_features, *require))))
    with StageProgress() as stage_progress:
        result = evaluate(EvalRequest(op=op, source=source, shapes=tuple(chosen), hardware=primary,
                                      settings=settings, baseline=baseline), progress=stage_progress)
    console = make_console()
    what = f"baseline {baseline}" if baseline else str(path)
    console.print(shape_table(result, f"{op} [{shape_set}] {what} — ceilings: {primary.name} {primary.source}"))
    if result.s_i is not None:
        console.print(f"S_i = {result.s_i:.3f} against {primary.source} ceilings "
                      f"({primary.bandwidth_tbs:.2f} TB/s, bf16 {primary.peaks_tflops.get('bf16', 0):.0f} TFLOP/s)")
        if other is not None:
            alt = rescore(result, other)
            if alt.s_i is not None:
                console.print(f"S_i = {alt.s_i:.3f} against {other.source} ceilings "
                              f"({other.bandwidth_tbs:.2f} TB/s, bf16 {other.peaks_tflops.get('bf16', 0):.0f} TFLOP/s)")
    if result.weighted_attainment is not None:
        console.print(f"weighted attainment = {result.weighted_attainment:.3f} (what aka optimize climbs; shape "
                      f"weights from {weights or 'shapes.yaml'})", markup=False, highlight=False)
    elif result.interpreter:
        console.print("S_i: not scored (interpreter timings are not scores)")
    from rich.markup import escape
    for flag in result.flags:
        console.print(f"[yellow]flag:[/] {escape(flag)}")
    if verbose:
        from sandbox.stage_times import breakdown_lines
        console.print("wall time by stage (sandbox/stage_times.py):", markup=False)
        for line in breakdown_lines(result.stage_times, result.wall_s):
            console.print(line, markup=False, highlight=False)
    scored = result.compile_info.get("scored_features")
    for b in (scored or {}).get("buckets", []) if result.accepted else []:   # --require: what each bucket uses
        console.print(f"features ({scored['target']}), shapes {', '.join(b['shapes'])}: "
                      f"{', '.join(b['features']) or 'none'}", markup=False, highlight=False)
    if result.accepted:
        console.print(f"[green]accepted[/]")
    else:
        console.print(f"[red]rejected[/] at {result.failed_stage}:")
        for r in result.reasons:
            console.print(f"  - {escape(r)}")
    if json_out:
        record = result.to_json()
        record["ceilings_other"] = None
        if other is not None and result.s_i is not None:
            alt = rescore(result, other)
            record["ceilings_other"] = {"source": other.source, "s_i": alt.s_i, "attainment": alt.attainment}
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(record, indent=2, default=str))
        console.print(f"wrote {json_out}")
    raise typer.Exit(0 if result.accepted else 1)


@app.command()
def calibrate(quick: bool = typer.Option(False, "--quick", help="fewer repetitions"),
              config: Optional[Path] = typer.Option(None, "--config"),
              override: List[str] = typer.Option([], "-c")):
    """Measure this GPU's memory bandwidth, bf16/fp8 matmul rates and latency floor; save them."""
    cfg = _config(config, override)
    from benchmarks.hardware import hardware_for_gpu, save_calibration
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError
    except Exception:
        raise usage_error("aka calibrate needs a CUDA GPU; none is visible (scores then use datasheet ceilings)")
    from benchmarks.calibrate import calibrate as run_calibration
    measured = run_calibration(quick=quick)
    key = hardware_for_gpu(measured["gpu_name"])
    if key is None:
        raise usage_error(f"no profile in configs/hardware matches {measured['gpu_name']!r}; add one first")
    path = save_calibration(cfg.home_dir, key, measured)
    typer.echo(json.dumps(measured, indent=2))
    typer.echo(f"saved calibrated ceilings for {key} to {path}")


def _mount() -> None:
    """Sub-commands that live in their own modules."""
    from agent.cli_audit import app as audit_app
    from agent.cli_kb import app as kb_app
    from agent.cli_e2e import e2e
    from agent.cli_optimize import optimize
    app.add_typer(kb_app, name="kb", help="the knowledge base: build, add, query, stats")
    app.add_typer(audit_app, name="audit", help="review runs: list, show, diff, verify, export")
    app.command("optimize")(optimize)
    app.command("e2e")(e2e)
    from agent.cli_report import report
    app.command("report")(report)
    from agent.cli_weights import trace, weights
    app.command("weights")(weights)
    app.command("trace")(trace)
    from agent.cli_nightly import nightly
    app.command("nightly")(nightly)


_mount()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
