"""How close do honest kernels come to the correctness gate's bounds? A false rejection, found before CI finds it.

    python -m agent.studies.tolerance_margins [--ops causal_conv1d,rms_norm] [--draws 20] [--out OUT.json] [--gpu]

The sandbox draws every evaluation's inputs and hold-out shapes from a fresh secret seed, so an honest kernel
whose error sits near a tolerance fails now and then: on 2026-12-06 CI rejected the honest corpus file
causal_conv1d_channel_per_program (1.1e-5 over 1e-5 + 1e-5*|ref|, terms of an outlier channel cancelling), about
one input draw in 400. One pass/fail run shows such a case rarely; its margin shows it every time.

For each operator, each honest source (the seed, and the honest corpus files in tests/sandbox/honest that run
on the CPU) runs under Triton's interpreter, as the sandbox runs it on a machine without a GPU (fp32, the
operator's interpreter_dims): on the corpus test's two visible shapes and on `--draws` draws of inputs and
hold-out shapes (draw d's hold-outs from random.Random(d), its input seeds from d: reproducible, unlike the
sandbox's). Each call is judged by the sandbox's own code (sandbox.results: expected, judge), and its margin is
the larger of
    worst element:  |out - ref| / (atol + rtol * max(|ref|, scale))     (over the gate's elementwise bound)
    rel_l2 / rel_l2 limit
so 1.0 is the gate's edge. The table lists each source's worst margin and where; a margin above WARN (0.5) is
flagged "near". Integer outputs and outputs an operator judges by invariants (`check`) are exact: they add
nothing to the margin when they pass. A failing call's margin is inf, and the JSON keeps the gate's reason.
Exit status 1 when any call failed.

--gpu: as the sandbox evaluates on a GPU instead: the operator's hot shapes at full size in their own dtypes
(bf16 mostly), hold-outs at full size, the GPU's honest corpus files too, kernels compiled for the card, references
without TF32 (the sandbox's own numerics).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HONEST = ROOT / "tests" / "sandbox" / "honest"
WARN = 0.5


def honest_sources(spec, gpu: bool = False) -> list[tuple[str, Path]]:
    """(label, path): the operator's seed and its honest corpus files that run on the CPU (with gpu, all of them)."""
    from sandbox.corpus import parse_header
    out = [("seed", Path(spec.seed_path))]
    for p in sorted(HONEST.glob("*.py")):
        head = parse_header(p.read_text())
        if head.get("op") == spec.name and (gpu or head.get("needs") == "cpu"):
            out.append((p.stem, p))
    return out


def _load(path: Path, op: str):
    mod_spec = importlib.util.spec_from_file_location(f"aka_margin_{path.stem}", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    fn = getattr(mod, op, None)
    if fn is None:
        raise SystemExit(f"{path}: defines no function {op}(), the operator's entry point")
    return fn


def margin_of(stats, tol_for) -> float:
    """The gate's margin of one call's float parts (1.0: the edge); 0 when nothing was compared elementwise."""
    worst = 0.0
    for st, tol in zip(stats, tol_for):
        got, want = st.worst_got, st.worst_expected
        # an infinite expected value at the worst index is one the output matched (compare reports it with the
        # output's value zeroed there): no error, as for equal values
        if got is not None and want is not None and got != want and math.isfinite(want):
            mag = max(abs(want), st.worst_scale or 0.0)
            bound = tol.atol + tol.rtol * mag
            err = abs(got - want)
            worst = max(worst, err / bound if bound > 0 else math.inf)
        if st.rel_l2_limit > 0:
            worst = max(worst, st.rel_l2 / st.rel_l2_limit)
        elif st.rel_l2 > 0:
            worst = math.inf
    return worst


def one_call(spec, fn, dims: dict, seed: int, dtype: str = "fp32", device: str = "cpu") -> tuple[float, str | None]:
    """(margin, the gate's reason when it fails) of fn at `dims` on the inputs of `seed`."""
    import torch

    from sandbox import correctness as cx
    from sandbox import results
    from sandbox.evaluation import _reference_numerics
    inputs = spec.make_inputs(dims, dtype, seed, device=device)
    with _reference_numerics():
        exp = results.expected(spec, inputs, dims, dtype, 0, keep_inputs=True)
    args = {k: (v.clone() if k in spec.mutates else v) for k, v in inputs.items()}
    tensors, problem = results.returned(fn(**args), spec)
    if problem:
        return math.inf, problem[1]
    got = tensors + [args[m] for m in spec.mutates]
    for t, p in zip(got, exp.parts):
        if not torch.is_tensor(t) or tuple(t.shape) != p.shape:
            return math.inf, f"{p.name}: got {tuple(getattr(t, 'shape', ()))}, expected {p.shape}"
    why, stats = results.judge(spec, got, exp, dtype)
    if why:
        return math.inf, why
    # judge's statistics are those of the parts it compares with a tolerance (after the outputs an operator's
    # `check` takes; integer parts compared exactly): their bounds, in the same order
    start = len(exp.parts) - len(spec.mutates) if spec.check is not None else 0
    tols = [cx.tolerance_for(spec, p.dtype, dtype) for p, g, r in list(zip(exp.parts, got, exp.results))[start:]
            if not (cx.is_exact(r.dtype) or cx.is_exact(g.dtype))]
    assert len(tols) == len(stats), (len(tols), len(stats))
    return margin_of(stats, tols), None


def shapes_for(spec, draws: int, gpu: bool = False) -> list[tuple[str, dict, str, int]]:
    """(label, dims, dtype, input seed) of every call: the visible shapes, then the hold-outs, once a draw. CPU: the
    corpus test's two visible shapes at interpreter_dims, in fp32; gpu: the hot shapes at full size, their dtypes."""
    from sandbox import correctness as cx
    from sandbox.corpus import visible_shapes
    visible = tuple(spec.select("hot")) if gpu else visible_shapes(spec, {})
    dtypes = list(dict.fromkeys(s.dtype for s in visible))

    def at(shape):
        return (dict(shape.dim), shape.dtype) if gpu else (spec.interpreter_dims(shape.dim), "fp32")
    out = []
    for d in range(draws):
        for s in visible:
            out.append((s.id, *at(s), 1000 * d + len(out)))
        for h in cx.holdout_shapes(spec, random.Random(d), dtypes, at=visible):
            out.append((f"holdout {h.dim}", *at(h), 1000 * d + len(out)))
    return out


def study(ops: list[str], draws: int, progress=print, save=None, gpu: bool = False) -> list[dict]:
    """The rows, one per (operator, source); `save(rows)` after each, so an interrupted run keeps what it did."""
    from benchmarks.registry import load_operator
    rows = []
    for op in ops:
        spec = load_operator(op)
        cases = shapes_for(spec, draws, gpu)
        for label, path in honest_sources(spec, gpu):
            fn = _load(path, op)
            worst = {"op": op, "source": label, "margin": 0.0, "where": None, "seed": None, "calls": 0,
                     "failures": []}
            for shape, dims, dtype, seed in cases:
                try:
                    m, why = one_call(spec, fn, dims, seed, dtype, "cuda" if gpu else "cpu")
                except Exception as e:          # the candidate raised: a failure of this call, not of the study
                    m, why = math.inf, f"raised {type(e).__name__}: {e}"
                worst["calls"] += 1
                if why:
                    worst["failures"].append({"shape": shape, "dims": dims, "dtype": dtype, "seed": seed, "why": why})
                if m > worst["margin"] or worst["where"] is None:
                    worst.update(margin=m, where=f"{shape} {dims} {dtype}", seed=seed)
            rows.append(worst)
            if save:
                save(rows)
            flag = "FAIL" if worst["failures"] else ("near" if worst["margin"] > WARN else "ok")
            progress(f"{op:28s} {label:44s} margin {worst['margin']:.3g} ({flag}) over {worst['calls']} calls",
                     flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| operator | source | worst margin | where (dims, input seed) | failures |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -r["margin"]):
        lines.append(f"| {r['op']} | {r['source']} | {r['margin']:.3g} | {r['where']}, seed {r['seed']} | "
                     f"{len(r['failures'])} of {r['calls']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default="", help="comma-separated operators (default: every operator)")
    ap.add_argument("--draws", type=int, default=10, help="input and hold-out draws per source (default 10)")
    ap.add_argument("--out", default="", help="write the rows as JSON here")
    ap.add_argument("--gpu", action="store_true", help="full-size hot shapes in their dtypes on the CUDA GPU")
    a = ap.parse_args(argv)
    if a.draws < 1:
        ap.error(f"--draws {a.draws}: at least 1")
    if a.gpu:
        import torch
        if not torch.cuda.is_available():
            ap.error("--gpu needs a CUDA GPU (run it on the H200 through the device tool), or leave it out")
    else:
        os.environ["TRITON_INTERPRET"] = "1"      # before triton is imported, as the sandbox's CPU worker does
    from benchmarks.registry import list_operators
    known = list_operators()
    ops = [o for o in a.ops.split(",") if o] or known
    unknown = sorted(set(ops) - set(known))
    if unknown:
        ap.error(f"--ops: unknown operator(s) {', '.join(unknown)}; known: {', '.join(known)}")
    out = Path(a.out) if a.out else None
    rows = study(ops, a.draws, save=out and (lambda r: out.write_text(json.dumps(r, indent=1, default=str))),
                 gpu=a.gpu)
    print(table(rows))
    return 1 if any(r["failures"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
