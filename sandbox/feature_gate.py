"""`--require FEATURE` (SandboxSettings.require_features) judged on the kernels the scored shapes run.

Why not the compile gate's one run: that run is the first shape at interpreter size, and a launcher with
size buckets picks other constexprs at the real shapes. fused_moe's hot prefill shape runs tl.dot tiles
that become wgmma; its tiny shape's tiles do not, so the one-run check rejected a kernel whose hot path
has wgmma. Here the features come from each visible shape's launch record (sandbox/launch_record.py):

- on a GPU, from the CompiledKernel objects triton's launcher returned during that shape's recorded call
  (sandbox.compile.LaunchRecorder.compiled): the PTX/SASS that ran, nothing compiled again;
- under the interpreter, the shape is recorded at its real dtype (the launch record ran in fp32) and
  the distinct specializations are compiled for sm_90 in one compile child, through the worker's Triton
  cache: what the compile gate already compiled is a cache hit.

A feature passes when some kernel of some scored shape has it (a decode bucket need not use wgmma when a
prefill bucket does). The verdict groups shapes into buckets (shapes that run the same specializations)
and names, per bucket and kernel, the features found and the required ones missing.
"""
from __future__ import annotations

import json

from sandbox.compile_child import FEATURES

INTERPRETER_NOTE = ("under the interpreter each shape runs at its scaled-down dims, which may choose other "
                    "buckets than the real shape does on a GPU")


def shape_key(dims: dict, dtype: str) -> str:
    """The key under which the worker keeps a visible shape's launch recorder."""
    return json.dumps(sorted(dict(dims).items())) + "/" + str(dtype)


def _spec_key(rec) -> str:
    return repr((rec.kernel_name, sorted(rec.signature.items()), sorted(rec.constexprs.items(), key=lambda kv: kv[0]),
                 rec.num_warps, rec.num_stages, rec.divisible_by_16, sorted(rec.options.items())))


# ---- worker side ---------------------------------------------------------------------------------

def record_run(worker, dims: dict, dtype: str, seed: int):
    """(LaunchRecorder, note) of one call of the candidate. Under the interpreter a bf16/fp16 run that raises
    (its arithmetic there is unreliable, where a GPU's is not) is repeated in fp32, and the note says so."""
    import sys
    from sandbox.compile import LaunchRecorder
    # the worker runs as __main__ (python -m sandbox.worker): its own class, not a second import's
    CandidateFailure = sys.modules[type(worker).__module__].CandidateFailure    # noqa: N806
    try:
        with LaunchRecorder() as recorder:
            worker.call(worker.make_inputs(dims, dtype, seed))
        return recorder, None
    except CandidateFailure as e:
        if not (worker.interpreter and dtype != "fp32"):
            raise
        note = f"the {dtype} run raised under the interpreter ({e.message[:300]}); launches recorded in fp32"
        with LaunchRecorder() as recorder:
            worker.call(worker.make_inputs(dims, "fp32", seed))
        return recorder, note


def features_of_launched(kernel) -> tuple[str, ...]:
    """Features of a CompiledKernel that ran: its SASS decides (compile_child.features_of)."""
    from sandbox.compile_child import cubin_facts, features_of
    cubin = kernel.asm.get("cubin") or b""
    sass = cubin_facts(cubin, kernel.metadata.name, sass=True)[1] if cubin else ""
    return features_of(str(kernel.asm.get("ptx") or ""), sass)


def on_features(worker, msg: dict) -> None:
    """Per shape of msg["shapes"] ({id, dims, dtype, seed}): which distinct specializations it ran, and the
    features of each. Reuses the recorders the worker kept from its `launches` calls (same dims and dtype)."""
    from sandbox.compile import LaunchRecorder, _encode, _resolve_target, compile_each
    merged = LaunchRecorder()            # never entered: the distinct records of all shapes, to compile once
    index_of: dict[str, int] = {}
    launched: dict[int, object] = {}
    shapes = []
    for s in msg["shapes"]:
        recorder = worker.launch_recorders.get(shape_key(s["dims"], s["dtype"]))
        note = None
        if recorder is None:
            recorder, note = record_run(worker, s["dims"], s["dtype"], s["seed"])
        indices = []
        for i, rec in enumerate(recorder.records):
            key = _spec_key(rec)
            if key not in index_of:
                index_of[key] = len(merged.records)
                merged.records.append(rec)
                merged.functions.setdefault(rec.kernel_name, recorder.functions.get(rec.kernel_name))
                if i in recorder.compiled:
                    launched[index_of[key]] = recorder.compiled[i]
            indices.append(index_of[key])
        merged.errors += [e for e in recorder.errors if e not in merged.errors]
        shapes.append({"id": s["id"], "specs": indices, "note": note})
    found: list[dict | None] = [None] * len(merged.records)
    for index, kernel in launched.items():
        found[index] = {"features": list(features_of_launched(kernel)), "error": None, "how": "launched"}
    target_name = _resolve_target(msg.get("target", "auto"))[1]
    errors: list[str] = []
    rest = [i for i in range(len(merged.records)) if found[i] is None]
    if rest:
        todo = LaunchRecorder()
        todo.records, todo.functions, todo.errors = [merged.records[i] for i in rest], merged.functions, merged.errors
        infos, errors, target_name = compile_each(todo, msg.get("target", "auto"), sass=True)
        for i, info in zip(rest, infos):
            found[i] = {"features": list(info.features) if info else [], "how": "compiled",
                        "error": (info.error if info else "not compiled (see errors)")}
    specs = []
    for rec, f in zip(merged.records, found):
        constexprs = {}
        for k, v in rec.constexprs.items():
            try:
                constexprs[k] = _encode(v)
            except TypeError:
                constexprs[k] = repr(v)[:80]
        specs.append({"kernel": rec.kernel_name, "constexprs": constexprs, "num_warps": rec.num_warps,
                      "num_stages": rec.num_stages, **f})
    worker.reply({"kind": "features", "target": target_name, "specs": specs, "shapes": shapes, "errors": errors})


# ---- parent side ---------------------------------------------------------------------------------

def judge(evaluation, w, pairs) -> None:
    """Ask the worker for the features of each visible shape's kernels; record them in
    compile_info["scored_features"]; raise Rejected("compile") when a required feature is in none of
    them, or a specialization a scored shape runs does not compile for the target."""
    from sandbox import correctness as cx
    from sandbox.correctness import Rejected
    required = tuple(evaluation.req.settings.require_features)
    unknown = [f for f in required if f not in FEATURES]
    if unknown:
        raise ValueError(f"require_features {unknown}: unknown; known: {', '.join(FEATURES)}")
    visible = [shape for shape, row in pairs if not row.holdout]
    evaluation.activity = "the feature gate: the compiled code of the kernels each visible shape runs"
    w.send({"kind": "features", "target": "auto", "shapes": [
        {"id": s.id, "dims": evaluation._dims(s), "dtype": s.dtype,
         "seed": cx.derive_seed(evaluation.base_seed, "launches", s.id)} for s in visible]})
    reply, _ = evaluation._expect(w, "features")
    record = summarize(reply, required, evaluation.interpreter)
    evaluation.result.compile_info["scored_features"] = record
    failed = [f"kernel {s['kernel']} ({describe_spec(s)}): {s['error']}" for s in reply["specs"] if s.get("error")]
    if failed or reply.get("errors"):
        raise Rejected("compile", "compile gate, on the specializations the scored shapes run: "
                       + "; ".join(failed + list(reply.get("errors") or []))[:3000])
    if record["missing"]:
        raise Rejected("compile", rejection(record))


def describe_spec(spec: dict) -> str:
    values = ", ".join(f"{k}={v}" for k, v in spec["constexprs"].items())
    return f"{values}; {spec['num_warps']} warps, {spec['num_stages']} stages" if values else \
        f"{spec['num_warps']} warps, {spec['num_stages']} stages"


def summarize(reply: dict, required: tuple[str, ...], interpreter: bool) -> dict:
    """The JSON record: per bucket (shapes running the same specializations) its kernels and features,
    and which required features no bucket has."""
    specs = reply["specs"]
    buckets: dict[tuple, list[str]] = {}
    notes = {}
    for s in reply["shapes"]:
        buckets.setdefault(tuple(sorted(set(s["specs"]))), []).append(s["id"])
        if s.get("note"):
            notes[s["id"]] = s["note"]
    out_buckets = []
    for indices, ids in buckets.items():
        have = {f for i in indices for f in specs[i]["features"]}
        out_buckets.append({"shapes": ids, "kernels": [specs[i] for i in indices],
                            "features": sorted(have), "missing": [f for f in required if f not in have]})
    everywhere = {f for b in out_buckets for f in b["features"]}
    return {"target": reply["target"], "required": list(required), "buckets": out_buckets,
            "missing": [f for f in required if f not in everywhere], "notes": notes,
            "interpreter_note": INTERPRETER_NOTE if interpreter else None}


def rejection(record: dict) -> str:
    """The reason: the missing features, then per bucket which features each kernel has."""
    from sandbox.compile import _FEATURE_HINTS
    lines = []
    for b in record["buckets"]:
        kernels = "; ".join(f"{k['kernel']} ({describe_spec(k)}) uses {', '.join(k['features']) or 'none of them'}"
                            for k in b["kernels"]) or "no kernel"
        lines.append(f"shape{'s' * (len(b['shapes']) > 1)} {', '.join(b['shapes'])}: {kernels}")
    missing = record["missing"]
    where = f" ({record['interpreter_note']})" if record.get("interpreter_note") else ""
    hints = " ".join(f"To use {f}: {_FEATURE_HINTS[f]}." for f in missing)
    return (f"required feature{'s' * (len(missing) > 1)} {', '.join(missing)} missing from the PTX/SASS of every "
            f"kernel the scored shapes run on {record['target']}{where}. Which of {', '.join(FEATURES)} they use, "
            f"per bucket of shapes that run the same kernels: " + " | ".join(lines) + f". {hints}")
