"""`aka optimize`: improve an operator's kernel unattended, recording everything in the audit trail.

    aka optimize --op rms_norm --shape-set hot                       # offline search proposer
    aka optimize --op fused_moe --model anthropic/claude-sonnet-4-6  # an LLM proposes
    aka optimize --op rms_norm --proposer scripted --script a.py --script b.py
    aka optimize --resume rms_norm-20261129-191700-ab12 --iterations 40
    aka optimize --op rms_norm --from-reference --model anthropic/claude-sonnet-4-6   # no seed: written from the reference

Exit codes: 0 the run ended (budget, target or proposer done), 2 usage or set-up error (bad
options, a provider/model/key/base URL the probe refused, a run another process is writing),
3 stopped by a fatal provider error mid-run (key revoked, model gone), 4 a --from-reference run ended
before any kernel passed every gate (its tries or a budget ran out), 128+N stopped by signal N
(130 SIGINT, 143 SIGTERM) after recording the current iteration.
Also runnable as `python -m agent.cli_optimize ...` (the kill/resume tests do).
"""
from __future__ import annotations

import dataclasses
import signal
from pathlib import Path
from typing import List, Optional

import typer

PROPOSERS = ("llm", "search", "scripted")
MAX_SAMPLES = 64      # parallel LLM requests per iteration: more is a typo, or a rate limit waiting to happen


from agent.cli_errors import EXIT_PROVIDER, check_number, read_kernel, usage_error as _usage


def _baseline_names(text: str | None) -> tuple[str, ...] | None:
    """--baselines as a tuple of names; None when not given (the plan's default); () for none."""
    if text is None:
        return None
    from sandbox.baselines import BASELINES
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if names == ("none",):
        return ()
    bad = [n for n in names if n not in BASELINES]
    if bad or not names:
        raise _usage(f"--baselines {text!r}: give a comma list of {', '.join(BASELINES)}, or none "
                     f"(e.g. --baselines eager,compile)")
    return tuple(dict.fromkeys(names))


def contract_for(spec, shapes) -> "OperatorContract":
    """What a proposer is told of the operator: never a hold-out shape (they are drawn per evaluation)."""
    from agent.types import OperatorContract
    from benchmarks.scoring import normalize
    from agent.from_reference import output_rows, reference_source
    weights = normalize({s.id: s.weight for s in shapes})
    tolerances = {dt: dataclasses.asdict(t) for dt, t in spec.module.TOLERANCES.items()}
    return OperatorContract(name=spec.name, signature=spec.signature, description=spec.description,
                            arg_names=tuple(spec.arg_names), tolerances=tolerances,
                            shapes=tuple({"id": s.id, "dims": s.dim, "dtype": s.dtype, "phase": s.phase,
                                          "weight": round(weights[s.id], 4)} for s in shapes),
                            reference=reference_source(Path(spec.module.__file__).read_text()),
                            outputs=output_rows(spec, shapes),
                            output_layout=getattr(spec.module, "OUTPUT_LAYOUT", "contiguous"))


class KnowledgeRetriever:
    """The loop's Retriever backed by the knowledge base (agent.retrieval)."""

    def __init__(self, kb, cfg):
        self.kb, self.k = kb, cfg.knowledge

    def snippets(self, contract, result, feedback):
        from agent.retrieval import build_query, retrieve_for_prompt
        diagnoses = [str(d) for d in (result.counters.get("diagnoses") or [])] if result is not None else []
        query = build_query(contract.name, result.to_json() if result is not None else None, diagnoses, None)
        return retrieve_for_prompt(self.kb, query, self.k.k, self.k.token_budget, self.k.hide_provenance)

    def remember(self, op, source, sha256, meta):
        from agent.retrieval import add_accepted
        add_accepted(self.kb, op, source, sha256, meta)


def _knowledge(cfg, say):
    """(retriever for the loop, knowledge base or None). A missing or broken knowledge base costs a
    warning, not the run."""
    from agent.loop import NoRetrieval
    if not cfg.knowledge.enabled:
        return NoRetrieval(), None
    try:
        from agent.retrieval import NullRetriever, open_retriever
        kb = open_retriever(cfg.kb_dir, enabled=True)
    except Exception as e:   # its dependencies are missing, or the index is unreadable
        say(f"knowledge retrieval unavailable ({type(e).__name__}: {e}); continuing without it "
            f"(`aka kb build` creates the knowledge base; -c knowledge.enabled=false silences this)")
        return NoRetrieval(), None
    if isinstance(kb, NullRetriever):
        return NoRetrieval(), None
    return KnowledgeRetriever(kb, cfg), kb


def _alternatives(kb, op: str, cfg) -> list[str]:
    """Other kernels for the operator from the knowledge base, for the search proposer."""
    if kb is None:
        return []
    try:
        from agent.retrieval import alternatives
        return [s.text for s in alternatives(kb, op, cfg.knowledge.hide_provenance)]
    except Exception:
        return []


def _proposer(name: str, model: str | None, script: list[str], skip: int, cfg, seed: int, alternatives: list[str]):
    if name == "scripted":
        from agent.proposers.scripted import ScriptedProposer
        if not script:
            raise _usage("--proposer scripted needs candidate files: --script a.py --script b.py")
        try:
            return ScriptedProposer(script, skip=skip)
        except FileNotFoundError as e:
            raise _usage(str(e))
    if name == "llm" and not model:
        raise _usage("--proposer llm needs --model PROVIDER/MODEL, e.g. --model anthropic/claude-sonnet-4-6")
    from agent.proposers import make_proposer
    kwargs = {"cfg": cfg, "seed": seed}
    if name == "llm":
        kwargs["model"] = model
    if name == "search":
        kwargs["alternatives"] = alternatives
    try:
        return make_proposer(name, **kwargs)
    except (KeyError, ValueError, ImportError) as e:
        raise _usage(f"cannot build the {name} proposer: {e}")


def optimize(
    op: Optional[str] = typer.Option(None, "--op", help="operator name (aka ops lists them)"),
    shape_set: str = typer.Option("hot", "--shape-set", help="hot | all | prefill | decode"),
    shapes_file: Optional[Path] = typer.Option(None, "--shapes", help="a shapes YAML of your own (the format of "
                                               "benchmarks/operators/<op>/shapes.yaml) instead of the operator's"),
    model: Optional[str] = typer.Option(None, "--model", help="PROVIDER/MODEL for the llm proposer; "
                                        "none: the offline search proposer"),
    proposer: Optional[str] = typer.Option(None, "--proposer", help="llm | search | scripted "
                                           "(default: llm with --model, else search)"),
    script: List[Path] = typer.Option([], "--script", help="a candidate file for --proposer scripted; "
                                      "repeat the option for several, replayed in order"),
    iterations: Optional[int] = typer.Option(None, "--iterations", help="stop after this many proposals"),
    minutes: Optional[float] = typer.Option(None, "--minutes", help="wall-clock budget"),
    gpu_minutes: Optional[float] = typer.Option(None, "--gpu-minutes", help="summed GPU time of evaluations"),
    tokens: Optional[int] = typer.Option(None, "--tokens", help="LLM tokens (prompt + completion)"),
    usd: Optional[float] = typer.Option(None, "--usd", help="LLM spend in USD"),
    seed_kernel: Optional[Path] = typer.Option(None, "--seed-kernel", help="starting kernel (default: the "
                                               "operator's seed.py)"),
    target: Optional[float] = typer.Option(None, "--target", help="stop once S_i reaches this (default 0.95)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="continue a recorded run (id or unique prefix)"),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="profile in configs/hardware (default: auto)"),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML config file"),
    override: List[str] = typer.Option([], "-c", help="config override key.path=value"),
    no_dropout: bool = typer.Option(False, "--no-dropout", help="turn optimization dropout off"),
    rng_seed: int = typer.Option(0, "--seed", help="seed for dropout and the proposers' randomness"),
    api_base: Optional[str] = typer.Option(None, "--api-base", help="base URL of the LLM provider (an "
                                           "OpenAI-compatible server: vLLM, SGLang, Ollama); same as "
                                           "-c llm.api_base=URL"),
    no_probe: bool = typer.Option(False, "--no-probe", help="skip the one tiny request that checks the LLM "
                                  "provider, model and key before the seed is evaluated"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="weights file (aka weights --from-trace): the "
                                           "shape weights of the score the run climbs"),
    from_reference: bool = typer.Option(False, "--from-reference", help="start without a seed: the LLM writes "
                                        "the first kernel from the contract and the PyTorch reference, retrying "
                                        "with each failure's reason until one passes every gate, then optimizes "
                                        "it (needs --model)"),
    reference_tries: Optional[int] = typer.Option(None, "--reference-tries", help="with --from-reference: "
                                                  "proposals to get a first passing kernel before giving up "
                                                  "(exit 4; default 10)"),
    samples: int = typer.Option(1, "--samples", help="candidates per iteration: the LLM gets N requests in "
                                "parallel, the search proposes its N best-ranked moves; all that differ are "
                                "evaluated, the best goes to acceptance (each counts as one of --iterations)"),
    baselines: Optional[str] = typer.Option(None, "--baselines", help="what users run instead, timed once per run "
                                            "beside the seed for the report's table: a comma list of eager, "
                                            "compile, liger, cublas, or none (default eager,compile); their GPU "
                                            "time counts against --gpu-minutes"),
):
    """Improve an operator's Triton kernel: measure, propose, check, accept only real gains, repeat."""
    from agent.config import ConfigError, load_config, use_interpreter_if_no_gpu
    interpreter = use_interpreter_if_no_gpu()    # before anything imports triton

    from agent.audit import Audit, AuditError, new_run_id
    from agent.budget import BudgetLimits
    from agent.loop import DEFAULT_REFERENCE_TRIES, EXIT_NO_KERNEL, Loop, RunPlan
    from agent.progress import Progress
    from benchmarks.registry import UnknownOperator, load_operator, load_shapes
    from benchmarks.spec import select_shapes

    check_number(target, "--target", 0.0, 1.0, low_ok=False, example="0.9")
    for value, option in ((minutes, "--minutes"), (gpu_minutes, "--gpu-minutes"), (usd, "--usd"),
                          (iterations, "--iterations"), (tokens, "--tokens")):
        check_number(value, option, 0.0, example="10")
    check_number(reference_tries, "--reference-tries", 1.0, example="10")
    if api_base is not None:
        if not api_base.startswith(("http://", "https://")):
            raise _usage(f"--api-base {api_base!r} is not an http(s) URL; e.g. --api-base http://127.0.0.1:8000/v1")
        override = [*override, f"llm.api_base={api_base}"]
    try:
        cfg = load_config(config, override)
    except ConfigError as e:
        raise _usage(str(e))
    if no_dropout:
        cfg = dataclasses.replace(cfg, dropout=dataclasses.replace(cfg.dropout, enabled=False))
    if samples < 1 or samples > MAX_SAMPLES:
        raise _usage(f"--samples {samples}: give 1 to {MAX_SAMPLES} candidates per iteration (1 is the default)")
    baseline_names = _baseline_names(baselines)
    if proposer is not None and proposer not in PROPOSERS:
        raise _usage(f"--proposer {proposer!r}: choose one of {', '.join(PROPOSERS)}")
    try:
        limits = BudgetLimits(iterations, minutes, gpu_minutes, tokens, usd)
    except ValueError as e:
        raise _usage(str(e))
    progress = Progress()
    if interpreter:
        from agent.report import INTERPRETER_NOTE
        keep = cfg.acceptance.untimed == "keep-incumbent"
        progress.message(f"note: {INTERPRETER_NOTE}; " + ("correct candidates are recorded but none can be shown "
                         "faster, so the seed stays the incumbent" if keep else "acceptance.untimed=accept-correct: "
                         "correct candidates are accepted without timing") + " (agent/acceptance.py)")
    if cfg.acceptance.repeats < 3:
        progress.message(f"warning: acceptance.repeats={cfg.acceptance.repeats}; fewer than 3 A/B pairs "
                         f"cannot tell a gain from noise well (agent/acceptance.py)")
    from agent.cli import resolve_hardware
    audit = Audit(cfg.audit_db)
    try:
        if resume:
            from agent.records import RunStart
            try:
                run_id = audit.resolve_run(resume)
            except AuditError as e:
                raise _usage(str(e))
            start = RunStart.from_json(audit.records(run_id, "run_start")[0].body)
            if weights is not None:
                raise _usage(f"--weights: run {run_id} keeps the shape weights it started with; drop --weights")
            if op and op != start.op:
                raise _usage(f"run {run_id} optimizes {start.op}, not {op}; drop --op when resuming")
            if (from_reference or reference_tries is not None) and not start.from_reference:
                raise _usage(f"run {run_id} started from a seed, not from the reference; drop --from-reference "
                             f"and --reference-tries when resuming it")
            hw, _ = resolve_hardware(cfg, hardware or start.hardware_name)
            old = RunPlan.from_record(start, hw, "" if start.from_reference else audit.source(start.seed_source_sha256))
            if baseline_names is not None:
                raise _usage(f"--baselines: run {run_id} timed its baselines when it started; drop --baselines "
                             f"when resuming it")
            plan = dataclasses.replace(old, limits=old.limits.merged(limits),
                                       target=old.target if target is None else target,
                                       dropout=old.dropout and not no_dropout,
                                       reference_tries=reference_tries or old.reference_tries)
            skip = sum(1 for r in audit.records(run_id, "iteration") if not r.body["record"]["is_seed"])
            name = proposer or plan.proposer
            scripts = [str(p) for p in script] or list(start.script)
        else:
            if not op:
                raise _usage("--op is required (aka ops lists the operators), or --resume RUN_ID")
            import yaml
            try:
                spec = load_operator(op)
                shapes = select_shapes(load_shapes(shapes_file), shape_set) if shapes_file else spec.select(shape_set)
            except yaml.YAMLError as e:
                mark = getattr(e, "problem_mark", None)
                where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
                raise _usage(f"--shapes {shapes_file} is not valid YAML ({where}{getattr(e, 'problem', None) or e}); "
                             f"the format is that of benchmarks/operators/{op}/shapes.yaml")
            except (UnknownOperator, ValueError, OSError, KeyError, TypeError) as e:
                where = f"--shapes {shapes_file}: " if shapes_file else ""
                raise _usage(f"{where}{type(e).__name__ if isinstance(e, (KeyError, TypeError)) else ''} {e}".strip()
                             + ("; the format is that of benchmarks/operators/<op>/shapes.yaml" if shapes_file else ""))
            if not shapes:
                raise _usage(f"{op} has no shapes in set {shape_set!r}; aka shapes --op {op} lists them")
            from agent.cli_weights import reweigh_option
            shapes = reweigh_option(weights, op, shapes, load_shapes(shapes_file) if shapes_file else spec.shapes)
            name = proposer or ("llm" if model else "search")
            if from_reference:
                if seed_kernel:
                    raise _usage(f"--from-reference starts without a seed; drop --seed-kernel {seed_kernel}, or "
                                 f"drop --from-reference to start from that kernel")
                if name == "search":
                    from agent.from_reference import needs_a_model
                    raise _usage(needs_a_model(name))
                seed_path, seed_text = "", ""
            elif reference_tries is not None:
                raise _usage("--reference-tries counts the tries of --from-reference; add --from-reference or "
                             "drop it")
            else:
                seed_path = Path(seed_kernel) if seed_kernel else Path(spec.seed_path)
                seed_text = read_kernel(seed_path, "--seed-kernel")
            hw, _ = resolve_hardware(cfg, hardware)
            scripts, skip = [str(p) for p in script], 0
            plan = RunPlan(op=op, shape_set=shape_set, shapes=shapes, hardware=hw, seed_source=seed_text,
                           seed_path=str(seed_path), target=0.95 if target is None else target,
                           limits=limits.with_default(), proposer=name, model=model, rng_seed=rng_seed,
                           dropout=not no_dropout, script=tuple(scripts), from_reference=from_reference,
                           reference_tries=reference_tries or DEFAULT_REFERENCE_TRIES,
                           **({} if baseline_names is None else {"baselines": baseline_names}))
            run_id = new_run_id(op)
        from agent.run_lock import RunLocked, acquire
        try:
            lock = acquire(cfg.audit_db, run_id)    # before the probe and the seed: one run, one writer
        except RunLocked as e:
            raise _usage(str(e))
        try:
            if lock.stale:
                progress.message(f"taking over the lock of run {run_id} left by pid {lock.stale.get('pid')} on "
                                 f"{lock.stale.get('host')} (it ended without releasing it: killed?)")
            spec = load_operator(plan.op)
            retriever, kb = _knowledge(cfg, progress.message)
            prop = _proposer(name, plan.model, scripts, skip, cfg, plan.rng_seed, _alternatives(kb, plan.op, cfg))
            if name == "llm" and not no_probe:
                _probe(plan.model, cfg, progress.message)
            from sandbox import Sandbox
            with Sandbox(cfg.sandbox) as sandbox:   # the run's pre-started workers and compile cache
                try:
                    loop = Loop(plan, cfg, prop, audit, contract_for(spec, plan.shapes), run_id, evaluate=sandbox,
                                retriever=retriever, progress=progress, samples=samples)
                except ValueError as e:   # e.g. resuming a --from-reference run with --proposer search
                    raise _usage(str(e))
                progress.message(f"run {run_id}: {plan.op} [{plan.shape_set}], proposer {name}"
                                 + (f" ({plan.model})" if plan.model else "") + f", audit {cfg.audit_db}")
                try:
                    outcome = loop.run(resume=bool(resume))
                except KeyboardInterrupt:    # a second Ctrl-C: the loop recorded the run's end already
                    raise typer.Exit(130)
        finally:
            lock.release()
    finally:
        audit.close()
    if outcome.exit_code:
        if outcome.exit_code in (EXIT_PROVIDER, EXIT_NO_KERNEL):
            typer.secho(f"error: {outcome.reason}", err=True, fg="red")
        raise typer.Exit(outcome.exit_code)
    return outcome


def _probe(model: str, cfg, say) -> None:
    """One tiny request to the provider before the seed is evaluated: a wrong provider, model, key or
    base URL stops here with exit 2, not after the seed and on every iteration."""
    from agent.proposers.llm_clients import ProbeError, ProposerConfigError, probe
    try:
        note = probe(model, cfg.llm)
    except (ProbeError, ProposerConfigError) as e:
        raise _usage(f"{e} (--no-probe skips this check)")
    if note:
        say(f"warning: {note}")


def main() -> None:
    typer.run(optimize)


if __name__ == "__main__":
    # Default SIGINT handling until the loop installs its own (a Ctrl-C during imports just exits).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
