"""Measure the new operators' seeds beside PyTorch eager, torch.compile and Liger-Kernel, in one process.

Every contender is timed the way the sandbox scores a candidate (sandbox.timing.time_call: CUDA-graph
replay, L2 flushed before every call, four input sets rotated, median), on each operator's hot shapes
(bf16), after a correctness check against the operator's reference at that shape:

  seed      benchmarks/operators/<op>/seed.py
  eager     the operator's baseline() (what a user runs instead), else its reference
  compile   torch.compile(baseline, dynamic=False), compiled afresh for every shape (torch._dynamo.reset()
            first), as a serving engine compiles for its captured batch sizes
  liger     Liger-Kernel's kernel where it has the operator (loaded lazily; "absent" when not installed)

    python -m agent.studies.measure_new_ops --out /tmp/new_ops [--ops softmax,l2_norm] [--max-shapes 3] [--variants]

--max-shapes 0 times every hot shape. --variants also times the seed's CONFIGS variants
(agent/studies/seed_variants.py, applied by its seed_variant, each checked against the reference first like
the seed) as `seed:<name>` beside the seed, in a table of their own (they are ours: never the "best other").
--dry-run runs the same checks on the CPU under Triton's interpreter at the operators' interpreter_dims in fp32
(seed, variants and eager; no torch.compile, no Liger, nothing timed).

Writes <out>/new_ops.md (a table per operator) and <out>/new_ops.json, and prints the summary last.
About 4-6 GPU minutes for 7 operators x 3 shapes, most of it torch.compile (one static compile per shape):
--jobs N runs those compiles in N processes first (agent/studies/compile_warmup.py), so the timed pass loads
them from Inductor's cache; split it with --ops where one command may run at most 10 minutes.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import json
import statistics
import sys
import time
from pathlib import Path

NEW_OPS = ("l2_norm", "gated_rms_norm", "layer_norm", "softmax", "moe_sum_reduce", "causal_conv1d", "top_k_top_p_filter",
           "fused_add_rms_norm", "reshape_and_cache",
           "rotary_embedding", "qk_rms_norm", "moe_topk_softmax",
           "per_token_quant_fp8", "per_token_group_quant_fp8", "rms_norm_quant_fp8",
           "moe_align_block_size", "causal_conv1d_update")
CONTENDERS = ("seed", "eager", "compile", "liger")
N_INPUT_SETS = 4
# Liger-Kernel's function for an operator: (module, attribute, why its contract differs or None), tried in
# order (LigerFusedAddRMSNormFunction.apply(x, residual, weight, eps) returns (out, residual_out)).
# Liger 0.8 has none of l2_norm, gated_rms_norm, moe_sum_reduce, causal_conv1d, moe_align_block_size,
# causal_conv1d_update.
# LigerLayerNormFunction.apply(x, weight, bias, eps): the operator's argument order.
LIGER = {
    "fused_add_rms_norm": [("liger_kernel.ops.fused_add_rms_norm", "LigerFusedAddRMSNormFunction", None)],
    "layer_norm": [("liger_kernel.ops.layer_norm", "LigerLayerNormFunction", None)],
}
# Operators whose Liger kernel takes another layout (rotary_embedding: HF's [B, H, S, D] views and cos/sin rows;
# qk_rms_norm: two RMSNorm calls) or needs the inputs converted to meet the contract (softmax: fp32 logits, for
# fp32 probabilities) define baseline_liger / baseline_liger_inputs in operator.py instead.


# ---- pure parts (tested on the CPU) ----------------------------------------------------------------
def pick_shapes(shapes, max_shapes: int):
    """The operator's hot shapes, heaviest first, at most `max_shapes` (0: all of them), keeping both phases
    where it has them."""
    hot = sorted((s for s in shapes if s.hot), key=lambda s: -s.weight)
    if max_shapes <= 0:
        return hot
    picked = []
    for phase in ("decode", "prefill"):
        picked += [s for s in hot if s.phase == phase][:max(1, max_shapes // 2)]
    rest = [s for s in hot if s not in picked]
    return (picked + rest)[:max_shapes]


def attainment(t_us: float | None, t_roof_us: float, floor_us: float) -> float | None:
    if not t_us:
        return None
    return min(1.0, max(t_roof_us, floor_us) / t_us)


def best_other(row: dict) -> tuple[str | None, float | None]:
    """The fastest correct contender other than the seed (a contender with another contract excluded)."""
    times = {k: v["t_us"] for k, v in row["contenders"].items()
             if k != "seed" and v.get("ok") and v.get("t_us") and not v.get("other_contract")}
    if not times:
        return None, None
    name = min(times, key=times.get)
    return name, times[name]


def _cell(c: dict | None) -> str:
    if not c:
        return "-"
    if c.get("error"):
        return c["error"][:40]
    if c.get("t_us") is None and "t_us" in c:      # a dry run: checked, not timed
        return "checked" if c.get("ok") else "WRONG"
    t = f"{c['t_us']:.2f}" if c.get("t_us") else "-"
    if c.get("mode") and c["mode"] != "graph":
        t += f" ({c['mode']})"
    if not c.get("ok"):
        t += " WRONG"
    return t + (" *" if c.get("other_contract") else "")


def render_markdown(result: dict) -> str:
    lines = ["# New operators: seeds beside PyTorch eager, torch.compile and Liger-Kernel", "",
             f"Command: `{result['command']}`", "",
             f"GPU {result['gpu']}, torch {result['torch']}, triton {result['triton']}, liger {result['liger']}; "
             f"latency floor {result['floor_us']:.2f} us; T_roof on the {result['hardware']} datasheet. Times in us "
             f"per call: CUDA-graph replay, L2 cold, {N_INPUT_SETS} input sets rotated, median. `seed / best` > 1: "
             f"the seed is slower than the best correct alternative. `*`: another contract (not in `best`).", ""]
    for op in result["ops"]:
        rows = [r for r in result["rows"] if r["op"] == op]
        a = [r["attainment"] for r in rows if r["attainment"] is not None]
        lines += [f"## {op}", "", f"median seed attainment {statistics.median(a):.2f}" if a else "no timed shape", "",
                  "| shape | phase | T_roof | seed | eager | compile | liger | best other | seed / best | attain |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            name, t = best_other(r)
            seed_t = r["contenders"].get("seed", {}).get("t_us")
            ratio = f"{seed_t / t:.2f}" if seed_t and t else "-"
            att = "-" if r["attainment"] is None else f"{r['attainment']:.2f}"
            cells = " | ".join(_cell(r["contenders"].get(k)) for k in CONTENDERS)
            lines.append(f"| {r['shape']} | {r['phase']} | {r['t_roof_us']:.2f} | {cells} | {name or '-'} | {ratio} | {att} |")
        lines.append("")
        lines += _variant_table(rows)
    return "\n".join(lines) + "\n"


def best_variant(row: dict) -> tuple[str | None, float | None]:
    """The fastest correct implementation of ours on a row: the seed or one of its variants."""
    ours = {"seed": row["contenders"].get("seed", {}), **row.get("variants", {})}
    times = {k: v["t_us"] for k, v in ours.items() if v.get("ok") and v.get("t_us")}
    if not times:
        return None, None
    name = min(times, key=times.get)
    return name, times[name]


def _variant_table(rows: list[dict]) -> list[str]:
    """Seed and variants side by side per shape (rows without variants: nothing)."""
    names = list(dict.fromkeys(v for r in rows for v in r.get("variants", {})))
    if not names:
        return []
    lines = ["Seed variants (`seed / best`: the seed's time over the fastest correct one of ours; `best other / "
             "best`: the best alternative's time over it, >= 1 means ours is ahead):", "",
             "| shape | seed | " + " | ".join(names) + " | best | seed / best | best other / best |",
             "|---|---|" + "---|" * len(names) + "---|---|---|"]
    for r in rows:
        name, t = best_variant(r)
        _, t_other = best_other(r)
        seed_t = r["contenders"].get("seed", {}).get("t_us")
        cells = " | ".join(_cell(r["variants"].get(n)) for n in names)
        ratio = f"{seed_t / t:.2f}" if seed_t and t else "-"
        vs_other = f"{t_other / t:.2f}" if t_other and t else "-"
        lines.append(f"| {r['shape']} | {_cell(r['contenders'].get('seed'))} | {cells} | {name or '-'} | {ratio} | "
                     f"{vs_other} |")
    wins = {}
    for r in rows:
        name, _ = best_variant(r)
        if name:
            wins.setdefault(name, []).append(r["shape"])
    lines += ["", "Fastest of ours per shape: " + "; ".join(f"{n}: {', '.join(s)}" for n, s in wins.items()), ""]
    return lines


# ---- the GPU run -------------------------------------------------------------------------------------
def implementations(spec, variants: bool, only_variants: set[str] | None = None) -> dict:
    """{"seed": the seed's function, "seed:<variant>": the seed run with the variant's CONFIGS, ...}, through
    seed_variants.seed_variant (the one way measure_baselines applies them too); only_variants: just those
    names (an operator without them: the seed alone)."""
    from agent.studies.seed_variants import VARIANTS, load_seed, seed_variant
    module = load_seed(spec)
    out = {"seed": seed_variant(module, {})}
    if variants:
        out.update({f"seed:{name}": seed_variant(module, ov) for name, ov in VARIANTS.get(spec.name, [])
                    if only_variants is None or name in only_variants})
    return out


def _liger(op: str, module=None):
    """(callable taking the operator's inputs, other-contract note or None, why absent or None) for Liger's
    kernel of op: LIGER's entry, else the operator's baseline_liger (its inputs converted outside the timing)."""
    why = "no such kernel"
    hook = getattr(module, "baseline_liger", None)
    if op not in LIGER and hook is not None:
        if importlib.util.find_spec("liger_kernel") is None:
            return None, None, "absent (liger_kernel not installed)"
        return hook, None, None
    for mod_name, attr, other in LIGER.get(op, []):
        try:
            return getattr(importlib.import_module(mod_name), attr).apply, other, None
        except (ImportError, AttributeError) as exc:
            why = f"absent ({type(exc).__name__})"
    return None, None, why


def _check(fn, call_inputs: dict, inputs: dict, spec, dims, dtype) -> tuple[bool, list]:
    """(ok, the returned tensors) of one call of a contender; ok by the sandbox's rules for every operator form
    (tuples of outputs, arguments written in place, `check`). `inputs` are the operator's, `call_inputs` what
    fn takes (a library's converted copies, else the same dict): the expected result comes from the operator's."""
    from sandbox import results
    exp = results.expected(spec, inputs, dims, dtype, 0, keep_inputs=True)
    args = {k: (v.clone() if k in spec.mutates else v) for k, v in call_inputs.items()}
    tensors, problem = results.returned(fn(args), spec)
    got = tensors + [args[m] for m in spec.mutates]
    ok = problem is None and all(tuple(g.shape) == p.shape and results.cx.dtype_name(g.dtype) == p.dtype
                                 for g, p in zip(got, exp.parts)) and results.passes(spec, got, exp, dtype)
    return ok, tensors


def _measure(fn, call_sets, spec, dims, dtype, reps: int, input_sets=None, dry_run: bool = False) -> dict:
    """One contender on one shape: checked (_check, on the first set) then timed on call_sets (unless dry_run:
    checked only). input_sets are the operator's inputs where call_sets are a library's conversions of them."""
    from sandbox import results
    from sandbox.timing import time_call
    try:
        ok, tensors = _check(fn, call_sets[0], (input_sets or call_sets)[0], spec, dims, dtype)
        if dry_run:
            return {"t_us": None, "ok": ok, "out_dtype": ",".join(results.cx.dtype_name(g.dtype) for g in tensors)}
        t = time_call(fn, call_sets, reps=reps)
        return {"t_us": t.t_s * 1e6, "mode": t.mode, "spread": t.spread, "t_eager_us": t.t_eager_s * 1e6, "ok": ok,
                "out_dtype": ",".join(results.cx.dtype_name(g.dtype) for g in tensors)}
    except Exception as exc:   # a contender that fails is a row, not a crashed study
        return {"error": f"{type(exc).__name__}: {exc}"[:300], "ok": False}


def run(ops, max_shapes: int, reps: int, command: str, variants: bool = False, dry_run: bool = False,
        only_variants: set[str] | None = None) -> dict:
    """Every contender on every picked shape. dry_run: on the CPU (the interpreter), interpreter_dims in fp32,
    the seed, its variants and eager checked, nothing timed or compiled."""
    import torch
    import triton
    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline

    hw = study_hardware()
    device = "cpu" if dry_run else "cuda"
    if dry_run:
        floor_us = math.nan
    else:
        from sandbox.timing import measure_floor
        floor_us = measure_floor() * 1e6
    try:
        import liger_kernel  # noqa: F401  (version only)
        from importlib.metadata import version
        liger_version = version("liger-kernel")
    except Exception:
        liger_version = "absent"
    rows = []
    for op in ops:
        spec = load_operator(op)
        ours = implementations(spec, variants, only_variants)
        seed_fn = ours.pop("seed")
        baseline = getattr(spec.module, "baseline", spec.reference)
        liger_fn, liger_other, liger_absent = _liger(op, spec.module)
        liger_prepare = getattr(spec.module, "baseline_liger_inputs", None)
        for shape in pick_shapes(spec.shapes, max_shapes):
            t0 = time.time()
            dims, dtype = (spec.interpreter_dims(shape.dim), "fp32") if dry_run else (shape.dim, shape.dtype)
            sets = [spec.make_inputs(dims, dtype, seed=1000 + i, device=device)
                    for i in range(1 if dry_run else N_INPUT_SETS)]
            fns = {"seed": lambda i: seed_fn(**i), "eager": lambda i: baseline(**i)}
            if not dry_run:
                torch._dynamo.reset()   # a fresh static compile for this shape, no automatic dynamic shapes
                compiled = torch.compile(baseline, dynamic=False)
                fns["compile"] = lambda i, c=compiled: c(**i)
            inputs_for = {}
            if dry_run:
                pass
            elif liger_fn is not None and op in LIGER:
                fns["liger"] = lambda i: liger_fn(*[i[a] for a in spec.arg_names if a in i])
            elif liger_fn is not None:         # operator.py's hook; its inputs converted once per set, untimed
                fns["liger"] = lambda i: liger_fn(**i)
                inputs_for["liger"] = [liger_prepare(**i) for i in sets] if liger_prepare else sets
            contenders = {name: _measure(fn, inputs_for.get(name, sets), spec, dims, dtype, reps, input_sets=sets,
                                         dry_run=dry_run)
                          for name, fn in fns.items()}
            tried = {name: _measure(lambda i, f=fn: f(**i), sets, spec, dims, dtype, reps, dry_run=dry_run)
                     for name, fn in ours.items()}
            if dry_run:
                contenders["liger"] = {"error": "not run (dry run)", "ok": False}
            elif liger_fn is None:
                contenders["liger"] = {"error": liger_absent, "ok": False}
            elif liger_other:
                contenders["liger"].update(other_contract=True, note=liger_other)
            t_roof_us = roofline(*spec.work(shape), hw).t_roof_s * 1e6
            rows.append({"op": op, "shape": shape.id, "dims": dims, "phase": shape.phase, "weight": shape.weight,
                         "t_roof_us": t_roof_us, "contenders": contenders, "variants": tried,
                         "attainment": attainment(contenders["seed"].get("t_us") if contenders["seed"].get("ok") else None,
                                                  t_roof_us, floor_us)})
            print(f"  {op} {shape.id}: " + ", ".join(f"{k} {_cell(v)}" for k, v in {**contenders, **tried}.items())
                  + f" ({time.time() - t0:.0f} s)", flush=True)
            del sets
            if not dry_run:
                torch.cuda.empty_cache()
    return {"command": command, "ops": list(ops), "rows": rows, "floor_us": floor_us, "hardware": hw.name,
            "gpu": "cpu (dry run: Triton interpreter, nothing timed)" if dry_run else torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": triton.__version__, "liger": liger_version, "dry_run": dry_run}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for new_ops.md and new_ops.json")
    ap.add_argument("--ops", default=",".join(NEW_OPS), help="comma-separated operators")
    ap.add_argument("--max-shapes", type=int, default=3, help="hot shapes per operator, heaviest first; 0: every "
                    "hot shape")
    ap.add_argument("--variants", action="store_true", help="also time the seed's CONFIGS variants "
                    "(agent/studies/seed_variants.py), each checked first")
    ap.add_argument("--only-variants", default="", help="with --variants: just these variant names "
                    "(comma-separated, e.g. pdl)")
    ap.add_argument("--dry-run", action="store_true", help="CPU: check the seed, its variants and eager under "
                    "Triton's interpreter at interpreter_dims (fp32); nothing timed")
    ap.add_argument("--reps", type=int, default=30, help="timed repetitions per contender and shape")
    ap.add_argument("--jobs", type=int, default=0, help="first fill torch.compile's caches for every (operator, "
                    "shape) in this many processes at once (agent/studies/compile_warmup.py); the timing stays "
                    "sequential in this process")
    args = ap.parse_args(argv)
    if args.dry_run:
        import os
        if os.environ.get("TRITON_INTERPRET") != "1" and "triton" in sys.modules:
            print("measure_new_ops: --dry-run needs TRITON_INTERPRET=1 before triton is imported", file=sys.stderr)
            return 2
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    if not args.dry_run and not torch.cuda.is_available():
        print("measure_new_ops: no CUDA GPU is visible to torch; run it on the GPU box", file=sys.stderr)
        return 2
    from benchmarks.registry import list_operators, load_operator
    ops = [o for o in args.ops.split(",") if o]
    unknown = sorted(set(ops) - set(list_operators()))
    if unknown:
        print(f"measure_new_ops: unknown operator(s) {', '.join(unknown)}; known: {', '.join(list_operators())}",
              file=sys.stderr)
        return 2
    command = "python -m agent.studies.measure_new_ops " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.variants or args.dry_run:
        from agent.studies.seed_variants import check_variants, load_seed
        bad = [p for op in ops for p in check_variants(op, load_seed(load_operator(op)).CONFIGS)]
        if bad:
            print("measure_new_ops: variants that do not apply:\n  " + "\n  ".join(bad), file=sys.stderr)
            return 2
    if args.jobs > 0 and not args.dry_run:
        from agent.studies.compile_warmup import warm
        t0 = time.monotonic()
        failed = warm(ops, args.max_shapes, args.jobs, pick_shapes)
        print(f"compile warm-up in {args.jobs} processes: {time.monotonic() - t0:.0f} s"
              + "".join(f"\n  not warmed: {f}" for f in failed), flush=True)
    only = {v for v in args.only_variants.split(",") if v} or None
    result = run(ops, args.max_shapes, args.reps, command, variants=args.variants or args.dry_run,
                 dry_run=args.dry_run, only_variants=only)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "new_ops.json").write_text(json.dumps(result, indent=1))
    text = render_markdown(result)
    (args.out / "new_ops.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
