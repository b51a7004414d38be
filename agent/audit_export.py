"""Reading runs back from the audit trail, and `aka audit export`: an upstream-ready bundle.

The bundle (one folder) holds:
  <op>.py                  the final accepted kernel, as the sandbox checked it
  reference_<op>.py        the operator file the run was checked against (recorded at run start), made
                           standalone: its one import from aka (the Tolerance dataclass) is inlined
  test_<op>.py             a pytest test of the kernel against the PyTorch reference, on the run's
                           shapes and on odd sizes; it imports nothing from aka
  PERFORMANCE.md           per shape: seed, final and baseline times, T_roof, attainment
  configs.json             the kernel's tuned CONFIGS keyed by GPU name, then triton version
  README.md                provenance: run id, audit record hashes, how to run the test
"""
from __future__ import annotations

import ast
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import records as R
from agent.audit import Audit, Record
from sandbox.verdict import EvalResult

AKA_PACKAGES = ("agent", "benchmarks", "sandbox", "knowledge")


class ExportError(RuntimeError):
    pass


@dataclass(frozen=True)
class RunView:
    """One run read back as typed records (agent/records.py); `rows` keeps each one's audit row (seq, ts, hash)."""

    run_id: str
    start: R.RunStart
    rows: tuple[tuple[Record, R.RunRecord], ...]

    def of(self, kind: type) -> list:
        return [t for _, t in self.rows if isinstance(t, kind)]

    def rows_of(self, kind: type) -> list[tuple[Record, Any]]:
        return [(raw, t) for raw, t in self.rows if isinstance(t, kind)]

    @property
    def started_at(self) -> str:
        return self.rows_of(R.RunStart)[0][0].ts

    @property
    def end(self) -> R.RunEnd | None:
        ends = self.of(R.RunEnd)
        return ends[-1] if ends else None

    def accepted(self) -> list[R.Accepted]:
        return self.of(R.Accepted)

    def final(self) -> R.Accepted:
        acc = self.accepted()
        if not acc:
            raise ExportError(f"run {self.run_id} has no accepted kernel yet (not even the seed's verdict)")
        return acc[-1]

    def incumbent_before(self, iteration: int) -> R.Accepted:
        """The accepted kernel the candidate of `iteration` was measured against."""
        acc = [a for a in self.accepted() if a.iteration < iteration]
        if not acc:
            raise ExportError(f"run {self.run_id}: no incumbent before iteration {iteration}")
        return acc[-1]

    def evaluation(self, iteration: int, sha: str | None = None, roles=("seed", "candidate")) -> EvalResult | None:
        hits = [e for e in self.of(R.Evaluation) if e.iteration == iteration and e.role in roles
                and (sha is None or e.source_sha256 == sha)]
        return hits[-1].eval_result() if hits else None

    def baselines(self) -> dict[str, EvalResult]:
        return {e.role.split(":", 1)[1]: e.eval_result() for e in self.of(R.Evaluation)
                if e.role.startswith("baseline:")}

    def iteration(self, it: int) -> R.Iteration:
        hits = [r for r in self.of(R.Iteration) if r.iteration == it]
        if not hits:
            raise ExportError(f"run {self.run_id} has no iteration {it}; `aka audit show {self.run_id}` lists them")
        return hits[-1]


def load_run(audit: Audit, run_id: str) -> RunView:
    rows = tuple((r, t) for r in audit.records(run_id) if (t := R.parse(r)) is not None)
    starts = [t for _, t in rows if isinstance(t, R.RunStart)]
    if not starts:
        raise ExportError(f"no run {run_id!r} in {audit.path}; `aka audit list` shows the runs")
    return RunView(run_id, starts[0], rows)


# ---- the bundle's parts ---------------------------------------------------------------------
def standalone_reference(operator_source: str) -> str:
    """The operator file with its imports from aka replaced by inlined definitions: Tolerance from
    benchmarks.spec, and the whole of benchmarks.inputs (its helpers call each other; it needs only torch)."""
    from benchmarks import inputs as inputs_module
    from benchmarks import spec as spec_module
    inlinable = {("benchmarks.spec", "Tolerance"): "from dataclasses import dataclass\n\n\n"
                 + inspect.getsource(spec_module.Tolerance)}
    whole_modules = {"benchmarks.inputs": _module_body(inspect.getsource(inputs_module))}
    tree = ast.parse(operator_source)
    lines = operator_source.splitlines(keepends=True)
    edits = []
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in AKA_PACKAGES for a in node.names):
            raise ExportError(f"operator file line {node.lineno}: `import {node.names[0].name}` cannot be made "
                              f"standalone; import names from benchmarks.spec instead")
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in AKA_PACKAGES:
            parts = []
            if node.module in whole_modules:
                parts.append(whole_modules[node.module])
                parts += [f"{a.asname} = {a.name}\n" for a in node.names if a.asname]
            else:
                for alias in node.names:
                    code = inlinable.get((node.module, alias.name))
                    if code is None:
                        raise ExportError(f"operator file line {node.lineno}: `from {node.module} import "
                                          f"{alias.name}` has no standalone copy; add it to "
                                          f"audit_export.standalone_reference")
                    parts.append(code + (f"\n{alias.asname} = {alias.name}\n" if alias.asname else ""))
            edits.append((node.lineno, node.end_lineno, "\n".join(parts)))
    for start, end, text in sorted(edits, reverse=True):
        lines[start - 1:end] = [f"# (inlined from aka for a standalone copy)\n{text}\n"]
    out = "".join(lines)
    ast.parse(out)
    return out


def _module_body(source: str) -> str:
    """A module's code without its docstring and `from __future__` imports (they must lead a file)."""
    tree = ast.parse(source)
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(
        getattr(tree.body[0], "value", None), ast.Constant) else tree.body
    lines = source.splitlines(keepends=True)
    return "".join("".join(lines[n.lineno - 1:n.end_lineno]) + "\n" for n in body
                   if not (isinstance(n, ast.ImportFrom) and n.module == "__future__"))


def tuned_configs(source: str) -> Any:
    """The literal value of the kernel's module-level CONFIGS, read without running the file."""
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "CONFIGS" for t in targets) and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return {"unparsed": ast.get_source_segment(source, node.value)}
    return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _environment(result: EvalResult | None) -> tuple[str, str]:
    env = (result.environment if result is not None else {}) or {}
    if result is not None and result.interpreter:
        gpu = "none (Triton interpreter)"
    else:
        gpu = env.get("gpu_name") or env.get("gpu") or env.get("device_name") or "unknown"
    triton = env.get("triton") or env.get("triton_version") or "unknown"
    return str(gpu), str(triton)


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def performance_markdown(view: RunView) -> str:
    final = view.final()
    # "before": the seed, or in a --from-reference run (no seed) the first kernel that passed every gate
    first = view.accepted()[0]
    seed_res = view.evaluation(first.iteration, first.source_sha256)
    before = "first" if first.from_reference else "seed"
    final_res = view.evaluation(final.iteration, final.source_sha256)
    base = view.baselines()
    hw = view.start.hardware if isinstance(view.start.hardware, dict) else {}
    interp = bool(seed_res and seed_res.interpreter)
    head = ["shape", "dims", "dtype", "weight", "T_roof (us)", f"{before} (us)", "final (us)", "speedup",
            f"attain {before}", "attain final"] + [f"{b} (us)" for b in base]
    out = [f"# {view.start.op}: performance of run {view.run_id}", "",
           f"Shape set `{view.start.shape_set}`; ceilings: {hw.get('name', '?')} ({hw.get('source', '?')}: "
           f"{hw.get('bandwidth_tbs', '?')} TB/s). Times are GPU time per call inside a CUDA graph, L2 cold, median. "
           f"Final kernel: iteration {final.iteration}, sha256 {final.source_sha256[:12]}.", ""]
    if first.from_reference:
        out += [f"No seed: the run wrote its kernels from the PyTorch reference (`--from-reference`); `first` is the "
                f"first one that passed every gate (iteration {first.iteration}).", ""]
    if interp:
        out += ["**Interpreter run (no GPU): correctness is real, the times below mean nothing and are not scores.**",
                ""]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows_seed = {s.id: s for s in (seed_res.visible_shapes() if seed_res else [])}
    rows_final = {s.id: s for s in (final_res.visible_shapes() if final_res else [])}
    rows_base = {b: {s.id: s for s in r.visible_shapes()} for b, r in base.items()}
    for sid in rows_seed or rows_final:
        s, f = rows_seed.get(sid), rows_final.get(sid)
        any_row = s or f
        speed = (s.t_us / f.t_us) if s and f and s.t_us and f.t_us else None
        cells = [sid, " ".join(f"{k}={v}" for k, v in any_row.dims.items()), any_row.dtype, _fmt(any_row.weight, ".3f"),
                 _fmt(any_row.t_roof_us, ".3g"), _fmt(s.t_us if s else None), _fmt(f.t_us if f else None),
                 _fmt(speed, ".2f") + ("x" if speed else ""), _fmt(s.attainment if s else None, ".3f"),
                 _fmt(f.attainment if f else None, ".3f")]
        cells += [_fmt(getattr(rows_base[b].get(sid), "t_us", None)) for b in base]
        out.append("| " + " | ".join(cells) + " |")
    if final_res is not None and final_res.s_i is not None:
        out += ["", f"S_i: {before} {_fmt(seed_res.s_i if seed_res else None, '.3f')}, final {final_res.s_i:.3f}."]
    return "\n".join(out) + "\n"


_TEST_TEMPLATE = '''"""Standalone test: the exported {op} kernel against its PyTorch reference.

    pytest -q test_{op}.py

With a CUDA GPU it runs the run's shapes at full size; without one, Triton's interpreter runs them
scaled down (reference_{op}.interpreter_dims) and in fp32, where the interpreter's bf16 is unreliable.
Exported by aka from run {run_id}; it imports nothing from aka.
"""
import importlib.util
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if not (Path("/dev/nvidiactl").exists() or Path("/dev/nvidia0").exists()):
    os.environ.setdefault("TRITON_INTERPRET", "1")   # must be set before triton is imported

import pytest  # noqa: E402
import torch  # noqa: E402


def _load(name, filename):
    spec = importlib.util.spec_from_file_location(name, HERE / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module     # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


ref = _load("reference_{op}", "reference_{op}.py")
kernel = _load("{op}_kernel", "{op}.py")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SHAPES = {shapes}


def _case(dims, dtype):
    if DEVICE == "cpu":
        dims = ref.interpreter_dims(dims)
        dtype = "fp32" if "fp32" in ref.TOLERANCES else dtype
    return dims, dtype


_SHORT = {{torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float8_e4m3fn: "fp8"}}


def _outputs(ret):
    """The call's outputs as a list: one tensor, or the tuple of the operator's OUTPUTS (none for OUTPUTS = ())."""
    if getattr(ref, "OUTPUTS", None) is None:
        return [ret]
    assert ret is None if ref.OUTPUTS == () else (type(ret) is tuple and len(ret) == len(ref.OUTPUTS)), type(ret)
    return [] if ret is None else list(ret)


def _check(dims, dtype, seed):
    inputs = ref.make_inputs(dims, dtype, seed, DEVICE)
    mutates = tuple(getattr(ref, "MUTATES", ()))        # arguments the operator writes in place, compared whole
    before = {{k: v.clone() for k, v in inputs.items() if torch.is_tensor(v)}}
    ref_args = {{k: (v.clone() if torch.is_tensor(v) else v) for k, v in inputs.items()}}
    with_scale = getattr(ref, "reference_with_scale", None)     # the gate's element scale, where the operator has one
    if with_scale is None:
        expected, scales = _outputs(ref.reference(**ref_args)), []
    else:
        ret, scale = with_scale(**ref_args)
        expected, scales = _outputs(ret), ([] if scale is None else _outputs(scale))
    expected += [ref_args[m] for m in mutates]
    got = _outputs(kernel.{op}(**inputs)) + [inputs[m] for m in mutates]
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    declared = ref.output_spec(dims, dtype)
    declared = [declared] if getattr(ref, "OUTPUTS", None) is None else list(declared)
    names = list(getattr(ref, "OUTPUTS", None) or ("out",))[:len(declared)] + list(mutates)
    check = getattr(ref, "check", None)     # results that are valid but not unique: the operator's own check
    if check is not None:
        outs = got[:len(declared)]
        why = check({{k: before.get(k, v) for k, v in inputs.items()}}, tuple(outs), tuple(expected[:len(declared)]))
        assert why is None, why
    for i, (name, out, e) in enumerate(zip(names, got, expected)):
        shape, out_dtype = declared[i] if i < len(declared) else (tuple(e.shape), _SHORT.get(e.dtype, dtype))
        assert tuple(out.shape) == tuple(shape), f"{{name}}: shape {{tuple(out.shape)}} != {{tuple(shape)}}"
        assert out.dtype == e.dtype, f"{{name}}: dtype {{out.dtype}} != {{e.dtype}}"
        if check is not None and i < len(declared):
            continue
        if not (out.is_floating_point() and e.is_floating_point()):
            assert torch.equal(out, e), f"{{name}}: integer output differs at {{dims}}"     # exact, no tolerance
            continue
        o, e = out.double(), e.double()
        assert torch.isfinite(o).all(), f"{{name}} has NaN or Inf"
        tol = ref.TOLERANCES.get(out_dtype, ref.TOLERANCES.get(dtype))
        scale = scales[i] if i < len(scales) else None      # bound: atol + rtol * max(|ref|, scale)
        magnitude = e.abs() if scale is None else torch.maximum(e.abs(), scale.to(o.device).double())
        excess = (o - e).abs() - (tol.atol + tol.rtol * magnitude)
        assert excess.max().item() <= 0, f"{{name}}: elementwise tolerance exceeded by {{excess.max().item():.3g}} at {{dims}}"
        rel_l2 = ((o - e).norm() / e.norm().clamp_min(1e-30)).item()
        assert rel_l2 <= tol.rel_l2, f"{{name}}: rel_l2 {{rel_l2:.3g}} > {{tol.rel_l2}} at {{dims}}"
    for k, v in before.items():
        assert k in mutates or torch.equal(inputs[k], v), f"input {{k}} was modified"


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("shape", SHAPES, ids=[s["id"] for s in SHAPES])
def test_run_shapes(shape, seed):
    _check(*_case(shape["dims"], shape["dtype"]), seed)


ODD = ref.holdout_dims(random.Random(20261129), [s["dims"] for s in SHAPES])


@pytest.mark.parametrize("dims", ODD, ids=[f"odd{{i}}" for i in range(len(ODD))])
def test_odd_sizes(dims):
    _check(*_case(dims, SHAPES[0]["dtype"]), 7)
'''


def render_test_file(op: str, run_id: str, shapes: list[dict[str, Any]]) -> str:
    rows = [{"id": s["id"], "dims": dict(s["dims"]), "dtype": s["dtype"]} for s in shapes]
    return _TEST_TEMPLATE.format(op=op, run_id=run_id, shapes=json.dumps(rows, indent=4))


def _e2e_files(home: Path, sha256: str) -> dict[str, str]:
    """`aka e2e` records that used this very kernel (latency, drift, accuracy with real weights): the evidence that it
    works inside a model."""
    from agent.e2e.run import evidence_for
    records = evidence_for(home, sha256)
    if not records:
        return {}
    lines = ["# This kernel inside a model (`aka e2e`)", "",
             "| model | layers | tp | S_TTFT | S_TPOT | logits rel L2 vs fp32: aka / stock (bound) | top-1 agreement | "
             "next-token accuracy: stock / aka (bound) | perplexity: stock / aka (nll bound) | passed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        m, s, d, a = r["model"], r["scores"], r["drift"], r.get("accuracy")
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        acc = "- | -" if not a else (
            f"{a['stock']['accuracy']:.4f} / {a['aka']['accuracy']:.4f} ({a['acc_bound']:.3g}, {a['tokens']} tokens) | "
            f"{a['stock']['perplexity']:.3f} / {a['aka']['perplexity']:.3f} ({a['nll_bound']:.3g})")
        lines.append(f"| {m['name']} | {m['layers']}/{m['full_layers']} | {m['tp']} | {fmt(s.get('S_TTFT'))} | "
                     f"{fmt(s.get('S_TPOT'))} | {d['rel_l2']:.3g} / {d['stock_rel_l2']:.3g} ({d['bound']:.3g}) | {d['top1_agreement']:.3f} | "
                     f"{acc} | {'yes' if r['passed'] else 'no'} |")
    notes = sorted({n for r in records for n in r.get("notes", [])})
    return {"E2E.md": "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n",
            "e2e.json": json.dumps(records, indent=2, default=str) + "\n"}


def export_run(audit: Audit, run_id: str, out_dir: str | Path) -> list[Path]:
    """Write the bundle for `run_id` into out_dir; returns the files written."""
    view = load_run(audit, run_id)
    op, final = view.start.op, view.final()
    source = audit.source(final.source_sha256)
    op_sha = view.start.operator_sha256
    if op_sha:
        operator_source = audit.source(op_sha)
    else:
        from benchmarks.registry import OPERATORS_DIR
        operator_source = (OPERATORS_DIR / op / "operator.py").read_text()
    final_res = view.evaluation(final.iteration, final.source_sha256)
    gpu, triton_version = _environment(final_res)
    configs = {gpu: {triton_version: {"op": op, "CONFIGS": _jsonable(tuned_configs(source)), "run_id": run_id,
                                      "iteration": final.iteration, "source_sha256": final.source_sha256,
                                      "score": final.score}}}
    acc_records = [raw for raw, a in view.rows_of(R.Accepted) if a.source_sha256 == final.source_sha256]
    files = {
        f"{op}.py": source,
        f"reference_{op}.py": standalone_reference(operator_source),
        f"test_{op}.py": render_test_file(op, run_id, list(view.start.shapes)),
        "PERFORMANCE.md": performance_markdown(view),
        "configs.json": json.dumps(configs, indent=2, sort_keys=True) + "\n",
        "README.md": (f"# {op} kernel from aka run {run_id}\n\n"
                      f"- `{op}.py`: the accepted kernel (iteration {final.iteration}, sha256 "
                      f"{final.source_sha256}).\n"
                      f"- `test_{op}.py`: `pytest -q test_{op}.py` checks it against `reference_{op}.py` "
                      f"(PyTorch) on the run's shapes and on odd sizes.\n"
                      f"- `PERFORMANCE.md`: per-shape times against the seed and the baselines.\n"
                      f"- `configs.json`: tuned CONFIGS keyed by GPU name and triton version.\n\n"
                      f"Provenance: audit record #{acc_records[-1].seq if acc_records else '?'} "
                      f"(hash {acc_records[-1].hash if acc_records else '?'}) in the run's audit database; "
                      f"`aka audit verify` checks the chain.\n"),
    }
    files.update(_e2e_files(Path(audit.path).parent, final.source_sha256))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        (out / name).write_text(text)
        written.append(out / name)
    return written
