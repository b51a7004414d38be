"""Importance weights from the user's own profiler traces (torch.profiler / Chrome trace JSON).

    time(op, shape, phase) = GPU time of the kernels the map attributes to (op, shape) in traces of that phase
    weight = time / total time of every kernel in the traces (unmapped time included, as op "unmapped")

Units of time: GPU kernels (trace categories kernel, gpu_memcpy, gpu_memset). A trace without any (a CPU-only
profile) falls back to the CPU operators' self time and says so (`device: cpu`): useful for tests and for
reading a trace's structure, never for weights of a GPU.

Attribution (configs/kernel_map.yaml, rules in order, the first that matches wins):
  kernel:     regexes on the kernel's name (vLLM's `rms_norm_kernel`, cuBLAS `nvjet_*`, ...)
  annotation: regexes on an enclosing record_function range (`aka trace` writes `aka:OP[K=V,...]`, which also
              carries the shape)
  cpu_op:     regexes on the operator that launched the kernel or encloses it (aten::mm, ...)
  within:     an extra condition: an enclosing range must match one of these (aten::mul inside aka:mlp[...])
  dims:       per cpu op name, how to read the shape from its "Input Dims": `in0[-1]` is input 0's last
              dim, `in0[:-1]` the product of all its dims but the last, `in1[0]` input 1's first dim
A kernel no rule matches stays in the totals under op "unmapped", listed by name with its time.
Kernels are linked to their launching CPU op by the trace's "External id"; enclosing ranges are found
by time containment on the launching thread.

This module imports only the standard library and pyyaml (benchmarks imports nothing else of aka).
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
ANNOTATION_CATEGORIES = ("user_annotation",)
PHASES = ("prefill", "decode")
UNMAPPED = "unmapped"
_AKA_ANNOTATION = re.compile(r"^aka:(?P<op>\w+)\[(?P<dims>[^\]]*)\]$")
_DIM_EXPR = re.compile(r"^in(?P<arg>\d+)\[(?P<sel>-?\d+|:-1)\]$")


class TraceError(ValueError):
    """A trace or map that cannot be read; the message names the file and the fix."""


class WeightsFileError(ValueError):
    pass


# ---- the kernel map -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    op: str
    kernel: tuple[re.Pattern, ...] = ()
    annotation: tuple[re.Pattern, ...] = ()
    cpu_op: tuple[re.Pattern, ...] = ()
    within: tuple[re.Pattern, ...] = ()     # and-condition: an enclosing annotation must match one of these
    dims: dict[str, dict[str, str]] = field(default_factory=dict)   # cpu op name -> {dim: expression}


def load_map(path: Path) -> list[Rule]:
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise TraceError(f"kernel map {path}: {e}")
    rules = []
    for i, r in enumerate(data.get("rules", [])):
        if "op" not in r:
            raise TraceError(f"kernel map {path}: rule {i + 1} has no `op`; every rule names the aka operator")
        try:
            comp = {k: tuple(re.compile(p) for p in r.get(k, [])) for k in ("kernel", "annotation", "cpu_op", "within")}
        except re.error as e:
            raise TraceError(f"kernel map {path}: rule {i + 1} ({r['op']}): bad regex: {e}")
        for name, spec in (r.get("dims") or {}).items():
            for dim, expr in spec.items():
                if not _DIM_EXPR.match(str(expr)):
                    raise TraceError(f"kernel map {path}: rule {r['op']}, {name}.{dim} = {expr!r}; write in0[-1], "
                                     f"in0[:-1] or in1[0]")
        rules.append(Rule(r["op"], dims=dict(r.get("dims") or {}), **comp))
    if not rules:
        raise TraceError(f"kernel map {path} has no rules; see configs/kernel_map.yaml for the format")
    return rules


# ---- reading a trace ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    """One piece of device time and what encloses it."""
    name: str
    dur_us: float
    cpu_ops: tuple[tuple[str, Any], ...]     # (name, Input Dims), innermost first
    annotations: tuple[str, ...]             # innermost first


def _nest(events: list[dict]) -> tuple[dict[int, list[dict]], dict[int, float]]:
    """For one thread's ranges (they nest): each range's enclosing ranges, innermost first (itself leading),
    and the time of each cpu op's direct cpu-op children. One pass over the ranges sorted by start."""
    stack: list[dict] = []
    enclosing: dict[int, list[dict]] = {}
    child_us: dict[int, float] = defaultdict(float)
    for e in sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0))):
        while stack and stack[-1]["ts"] + stack[-1].get("dur", 0) <= e["ts"]:
            stack.pop()
        if e.get("cat") == "cpu_op":
            above = [x for x in stack if x.get("cat") == "cpu_op"]
            if above:
                child_us[id(above[-1])] += e.get("dur", 0)
        enclosing[id(e)] = [e] + stack[::-1]
        stack.append(e)
    return enclosing, child_us


def read_trace(path: Path) -> tuple[list[Unit], dict[str, Any], str]:
    """(units of device time, the trace's `aka` metadata or {}, "gpu" | "cpu")."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise TraceError(f"trace {path}: {e} (expected a torch.profiler export_chrome_trace JSON file)")
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"trace {path}: no traceEvents list; is it a Chrome trace?")
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    by_thread: dict[tuple, list[dict]] = defaultdict(list)
    by_external: dict[Any, dict] = {}
    for e in complete:
        if e.get("cat") in ("cpu_op",) + ANNOTATION_CATEGORIES:
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
            ext = (e.get("args") or {}).get("External id")
            if e.get("cat") == "cpu_op" and ext is not None:
                prev = by_external.get(ext)
                if prev is None or e.get("dur", 0) < prev.get("dur", 0):
                    by_external[ext] = e                     # the innermost op with that id launched it
    nested = [_nest(v) for v in by_thread.values()]
    enclosing = {k: v for enc, _ in nested for k, v in enc.items()}
    meta = data.get("aka", {}) if isinstance(data, dict) else {}
    gpu = [e for e in complete if e.get("cat") in GPU_CATEGORIES]
    units = []
    if gpu:
        for k in gpu:
            launcher = by_external.get((k.get("args") or {}).get("External id"))
            context = enclosing.get(id(launcher), []) if launcher is not None else []
            units.append(_unit(k["name"], float(k.get("dur", 0)), context))
        return units, meta, "gpu"
    for events, (enc, child_us) in zip(by_thread.values(), nested):   # CPU-only profile: cpu ops' self time
        for e in events:
            if e.get("cat") == "cpu_op" and e.get("dur", 0) - child_us[id(e)] > 0:
                units.append(_unit(e["name"], float(e.get("dur", 0) - child_us[id(e)]), enc[id(e)]))
    return units, meta, "cpu"


def _unit(name: str, dur: float, context: list[dict]) -> Unit:
    return Unit(name, dur,
                tuple((e["name"], (e.get("args") or {}).get("Input Dims")) for e in context if e.get("cat") == "cpu_op"),
                tuple(e["name"] for e in context if e.get("cat") in ANNOTATION_CATEGORIES))


# ---- attribution ----------------------------------------------------------------------------------
def _eval_dim(expr: str, input_dims: Any) -> int | None:
    m = _DIM_EXPR.match(expr)
    try:
        dims = input_dims[int(m.group("arg"))]
        if m.group("sel") == ":-1":
            return int(math.prod(dims[:-1]))
        return int(dims[int(m.group("sel"))])
    except (TypeError, IndexError, ValueError):
        return None


def _dims_of(rule: Rule, unit: Unit, annotation: str | None) -> dict[str, int] | None:
    if annotation is not None:
        m = _AKA_ANNOTATION.match(annotation)
        if m and m.group("dims"):
            return {k: int(v) for k, v in (kv.split("=") for kv in m.group("dims").split(","))}
    for name, input_dims in unit.cpu_ops:
        spec = rule.dims.get(name)
        if spec:
            got = {d: _eval_dim(str(e), input_dims) for d, e in spec.items()}
            if all(v is not None for v in got.values()):
                return got
    return None


def match(rules: list[Rule], unit: Unit) -> tuple[str, dict[str, int] | None]:
    """(operator, dims or None) for one unit of time; (UNMAPPED, None) when no rule matches."""
    for rule in rules:
        inside = next((a for a in unit.annotations if any(p.search(a) for p in rule.within)), None)
        if rule.within and inside is None:
            continue
        ann = next((a for a in unit.annotations if any(p.search(a) for p in rule.annotation)), None)
        hit = (any(p.search(unit.name) for p in rule.kernel) or ann is not None
               or any(p.search(n) for n, _ in unit.cpu_ops for p in rule.cpu_op))
        if hit:
            return rule.op, _dims_of(rule, unit, ann or inside)
    return UNMAPPED, None


def shape_id(dims: dict[str, int] | None) -> str:
    return "-".join(f"{k}{v}" for k, v in dims.items()) if dims else "unknown"


@dataclass(frozen=True)
class Weights:
    """A weights file: GPU-time shares per (operator, shape, phase), unmapped time included."""
    entries: tuple[dict, ...]             # op, shape, dims, phase, time_us, weight
    total_us: float
    device: str
    traces: tuple[str, ...] = ()
    unmapped: tuple[dict, ...] = ()       # kernel name, time_us, phase: the largest unmapped kernels

    @property
    def unmapped_share(self) -> float:
        return sum(e["weight"] for e in self.entries if e["op"] == UNMAPPED)

    def operator_weights(self, shape_set: str, ops: Iterable[str] = ()) -> dict[str, float]:
        """w_i before normalization for the phases of a shape set (hot and all: both phases); operators the
        traces never ran get 0 (their kernels took no time)."""
        phases = PHASES if shape_set in ("hot", "all") else (shape_set,)
        out: dict[str, float] = {op: 0.0 for op in ops}
        for e in self.entries:
            if e["op"] != UNMAPPED and e["phase"] in phases:
                out[e["op"]] = out.get(e["op"], 0.0) + e["weight"]
        return out

    def to_json(self) -> dict:
        return {"kind": "aka-weights", "version": 1, "device": self.device, "traces": list(self.traces),
                "total_us": self.total_us, "unmapped_share": self.unmapped_share, "entries": list(self.entries),
                "unmapped_kernels": list(self.unmapped)}


def weights_from_traces(paths: list[Path], rules: list[Rule], phase: str | None = None) -> Weights:
    """Sum device time per (op, shape, phase) over the traces and normalize by all of it."""
    time: dict[tuple, float] = defaultdict(float)
    dims_of: dict[tuple, dict] = {}
    unmapped: dict[tuple[str, str], float] = defaultdict(float)
    devices = set()
    for path in paths:
        units, meta, device = read_trace(path)
        devices.add(device)
        ph = phase or meta.get("phase")
        if ph not in PHASES:
            raise TraceError(f"trace {path}: phase {ph!r} unknown; pass --phase prefill|decode for traces that "
                             f"`aka trace` did not write")
        for u in units:
            op, dims = match(rules, u)
            key = (op, shape_id(dims), ph)
            time[key] += u.dur_us
            dims_of[key] = dims or {}
            if op == UNMAPPED:
                unmapped[(u.name, ph)] += u.dur_us
    total = sum(time.values())
    if total <= 0:
        raise TraceError(f"traces {', '.join(map(str, paths))} hold no device time (were they recorded with "
                         f"ProfilerActivity.CUDA on a GPU?)")
    entries = tuple({"op": op, "shape": sid, "dims": dims_of[(op, sid, ph)], "phase": ph, "time_us": t,
                     "weight": t / total} for (op, sid, ph), t in sorted(time.items(), key=lambda kv: -kv[1]))
    top = tuple({"kernel": n, "phase": ph, "time_us": t}
                for (n, ph), t in sorted(unmapped.items(), key=lambda kv: -kv[1])[:30])
    device = "gpu" if devices == {"gpu"} else "cpu" if devices == {"cpu"} else "mixed"
    return Weights(entries, total, device, tuple(map(str, paths)), top)


def load_weights(path: Path) -> Weights:
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise WeightsFileError(f"weights file {path}: {e}; `aka weights --from-trace` writes one")
    if not isinstance(d, dict) or d.get("kind") != "aka-weights":
        raise WeightsFileError(f"{path} is not an aka weights file (no \"kind\": \"aka-weights\"); "
                               f"`aka weights --from-trace TRACE.json` writes one")
    return Weights(tuple(d["entries"]), float(d["total_us"]), d.get("device", "?"), tuple(d.get("traces", ())),
                   tuple(d.get("unmapped_kernels", ())))
