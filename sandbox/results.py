"""What one call produces, for operators with one output, several outputs, or arguments written in place.

A call's checked result is a list of parts: the returned outputs in OUTPUTS order (one named "out" for a
single-output operator), then each MUTATES argument, whole, as it is after the call (benchmarks/spec.py).
Worker side: `returned` turns the candidate's return value into its output tensors (or a problem),
`outputs_problem` checks each one's type, dtype, shape, device, aliasing and layout, `pack` sends the parts'
bytes. Parent side: `expected` runs the reference on clones of the mutated arguments, `decode` reads the
parts back, `judge` compares them (or hands the outputs to the operator's `check`). A single-output operator
that mutates nothing gets exactly the messages it got before parts existed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchmarks.spec import OperatorSpec
from sandbox import correctness as cx


@dataclass(frozen=True)
class Part:
    name: str
    shape: tuple[int, ...]
    dtype: str
    mutated: bool = False       # a MUTATES argument, read back after the call

    def to_json(self) -> list:
        return [self.name, list(self.shape), self.dtype]


@dataclass(frozen=True)
class Expected:
    """The parent's view of one trial: digests of the arguments the call must not write, the reference's
    parts, (for an operator with `check`) the inputs themselves, and (for an operator with
    `reference_with_scale`) each part's element scale, None for parts without one."""

    digests: dict[str, str]
    results: list
    parts: list[Part]
    inputs: dict | None = None
    scales: list | None = None


def single(spec: OperatorSpec) -> bool:
    """Today's contract: one returned tensor, nothing written in place (messages stay as they were)."""
    return spec.output_names is None and not spec.mutates


def output_parts(spec: OperatorSpec, dims, dtype: str) -> list[Part]:
    return [Part(n, s, d) for n, s, d in spec.outputs(dims, dtype)]


def parts_of(spec: OperatorSpec, dims, dtype: str, inputs: dict) -> list[Part]:
    """Every checked part of a call on `inputs`: the outputs, then the mutated arguments as they are shaped."""
    return output_parts(spec, dims, dtype) + [
        Part(m, tuple(inputs[m].shape), cx.dtype_name(inputs[m].dtype), True) for m in spec.mutates]


def part_nbytes(part: Part) -> int:
    import torch
    return math.prod(part.shape) * torch.empty(0, dtype=cx.torch_dtype(part.dtype)).element_size()


def nbytes(parts: list[Part]) -> int:
    return sum(part_nbytes(p) for p in parts)


def label(spec: OperatorSpec, part: Part) -> str:
    """How a message names a part ("" for the one output of a single-output operator)."""
    if single(spec):
        return ""
    if part.mutated:
        return f"{part.name} (written in place, compared whole, unchanged elements included): "
    return f"output {part.name}: "


# ---- worker side ---------------------------------------------------------------------------------
def returned(ret, spec: OperatorSpec) -> tuple[list, tuple[str, str] | None]:
    """(the output tensors in OUTPUTS order, None) or ([], (kind, why)) when the return value has the wrong form.
    A single-output operator's return value is passed through as is (output_problem checks its type)."""
    names = spec.output_names
    if names is None:
        return [ret], None
    if names == ():
        if ret is not None:
            return [], ("type", f"the call writes its result into {', '.join(spec.mutates)} in place and must "
                                f"return None, got {type(ret).__module__}.{type(ret).__qualname__}")
        return [], None
    if type(ret) is not tuple or len(ret) != len(names):
        got = f"a tuple of {len(ret)}" if type(ret) is tuple else f"{type(ret).__module__}.{type(ret).__qualname__}"
        return [], ("type", f"the call must return a tuple of {len(names)} tensors ({', '.join(names)}), in this "
                            f"order; got {got}")
    return list(ret), None


def outputs_problem(spec: OperatorSpec, tensors: list, parts: list[Part], device_type: str, inputs: dict,
                    layout: str) -> tuple[str, str] | None:
    """(kind, why) an output cannot be accepted, or None: each output as output_problem checks one, and no
    two outputs sharing memory."""
    import torch
    seen: dict[int, str] = {}
    for t, part in zip(tensors, parts):
        problem = cx.output_problem(t, part.shape, part.dtype, device_type, inputs, layout)
        if problem is not None:
            return problem[0], label(spec, part) + problem[1]
        ptr = t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) and t.numel() else None
        if ptr is not None and ptr in seen:
            return "alias", (f"outputs {seen[ptr]} and {part.name} share memory: each output must be its own "
                             f"allocation")
        if ptr is not None:
            seen[ptr] = part.name
    return None


def header_of(tensors: list, parts: list[Part]) -> dict:
    """The trial header's description of the parts sent (and, for one part, today's dtype/shape fields)."""
    head = {"parts": [[p.name, list(t.shape), cx.dtype_name(t.dtype)] for p, t in zip(parts, tensors)]}
    if len(tensors) == 1:
        head.update(dtype=cx.dtype_name(tensors[0].dtype), shape=list(tensors[0].shape))
    return head


def pack(tensors: list):
    """The parts' bytes, back to back (one part: a view, no copy)."""
    import torch
    views = [memoryview(t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()) for t in tensors]
    if len(views) == 1:
        return views[0]
    return b"".join(bytes(v) for v in views)


# ---- parent side ---------------------------------------------------------------------------------
def reference_outputs(spec: OperatorSpec, ret) -> list:
    names = spec.output_names
    if names is None:
        return [ret]
    if names == ():
        return []
    return list(ret)


def expected(spec: OperatorSpec, inputs: dict, dims, dtype: str, key: int, calls: int = 1,
             keep_inputs: bool = False, timed=None) -> Expected:
    """The reference's parts for `inputs`: digests of the arguments that must stay unchanged first, then
    the reference on clones of the mutated arguments, applied `calls` times (a timed graph that calls the
    operator k times on one input set mutates it k times). `timed(name)`: a context manager that times
    the digests and the reference runs (the evaluation's stage clock).

    An operator with `reference_with_scale` is run through it instead of `reference`: the same result and,
    from the same pass over the parent's own inputs, each output's element scale (the last call's)."""
    import contextlib
    import torch
    timed = timed or (lambda name: contextlib.nullcontext())
    with timed("references/digests"):
        digests = cx.input_digests({k: v for k, v in inputs.items() if k not in spec.mutates}, key)
    clones = {m: inputs[m].clone() for m in spec.mutates}
    args = {**inputs, **clones}
    with_scale = spec.reference_with_scale
    ret = scale = None
    with timed("references/reference"):
        for _ in range(max(1, int(calls))):
            if with_scale is None:
                ret = spec.reference(**args)
            else:
                ret, scale = with_scale(**args)
    results = reference_outputs(spec, ret) + [clones[m] for m in spec.mutates]
    parts = output_parts(spec, dims, dtype) + [
        Part(m, tuple(clones[m].shape), cx.dtype_name(clones[m].dtype), True) for m in spec.mutates]
    for t, p in zip(results, parts):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != p.shape:
            raise cx.HarnessError(f"operator {spec.name}: the reference's {p.name} is "
                                  f"{getattr(t, 'shape', type(t).__name__)}, but output_spec says {p.shape}")
    scales = None if with_scale is None else _scales(spec, scale, parts)
    return Expected(digests, results, parts, dict(inputs) if keep_inputs else None, scales)


def _scales(spec: OperatorSpec, scale, parts: list[Part]) -> list:
    """reference_with_scale's scale as one entry per part (mutated arguments get none), shape-checked."""
    import torch
    n_out = len(parts) - len(spec.mutates)
    if spec.output_names is None or scale is None:
        per_output = [scale] * n_out
    elif type(scale) is tuple and len(scale) == n_out:
        per_output = list(scale)
    else:
        raise cx.HarnessError(f"operator {spec.name}: reference_with_scale's scale must be a tuple of {n_out} "
                              f"(a tensor or None per output, in OUTPUTS order), got {type(scale).__name__}")
    for s, p in zip(per_output, parts):
        if s is not None and (not isinstance(s, torch.Tensor) or tuple(s.shape) != p.shape):
            raise cx.HarnessError(f"operator {spec.name}: the scale of {p.name} is "
                                  f"{getattr(s, 'shape', type(s).__name__)}, but output_spec says {p.shape}")
    return per_output + [None] * len(spec.mutates)


def decode(spec: OperatorSpec, head: dict, payload, parts: list[Part]) -> list | str:
    """The parts a header and payload carry, as tensors of the expected shapes, or why they cannot be read.
    `payload`: the frame's bytes, or a uint8 tensor read from the output slot (sandbox/output_slot.py)."""
    import torch
    got = head.get("parts")
    if not isinstance(got, list) or len(got) != len(parts):
        return f"the result came back with {len(got) if isinstance(got, list) else 0} parts, expected {len(parts)}"
    total = nbytes(parts)
    for p, g in zip(parts, got):
        name, shape, dtype = (list(g) + [None, None, None])[:3]
        if dtype != p.dtype or tuple(shape or ()) != tuple(p.shape):
            return (f"{label(spec, p)}output dtype/shape {dtype}/{shape} is not {p.dtype}/{list(p.shape)}")
    size = payload.numel() if isinstance(payload, torch.Tensor) else len(payload)
    if size != total:
        return f"the output came back with {size} bytes, expected {total}"
    if isinstance(payload, torch.Tensor):     # read from the output slot: the parent's own uint8 tensor
        raw = payload
    else:   # the frame's payload is already a writable bytearray of its own (sandbox/protocol.py): no copy of it
        buf = payload if isinstance(payload, bytearray) else bytearray(payload)
        raw = torch.frombuffer(buf, dtype=torch.uint8) if total else torch.empty(0, dtype=torch.uint8)
    out, at = [], 0
    for p in parts:
        n, dt = part_nbytes(p), cx.torch_dtype(p.dtype)
        chunk = raw[at:at + n]
        if at % torch.empty(0, dtype=dt).element_size():   # e.g. fp32 scales after an fp8 tensor of odd size
            chunk = chunk.clone()
        out.append(chunk.view(dt).reshape(p.shape))
        at += n
    return out


def judge(spec: OperatorSpec, got: list, exp: Expected, in_dtype: str, detail: bool = True
          ) -> tuple[str | None, list[cx.ErrorStats]]:
    """(why the parts fail, None when they pass; the tolerance statistics of the float parts compared).

    With the operator's `check`, the outputs go to it instead of the elementwise comparison, after a NaN
    check; mutated arguments are still compared whole."""
    import torch
    n_out = len(exp.parts) - len(spec.mutates)
    fails, stats, start = [], [], 0
    check = spec.check
    if check is not None:
        start = n_out
        outs = [g.to(r.device) for g, r in zip(got[:n_out], exp.results[:n_out])]
        nan = [p.name for p, t in zip(exp.parts, outs) if t.is_floating_point() and bool(torch.isnan(t).any())]
        if nan:
            fails.append(f"output {', '.join(nan)} holds NaN (NaN never passes; outputs are poisoned with NaN "
                         f"before each call, so this is often an element the kernel never wrote)")
        else:
            why = check(dict(exp.inputs or {}), tuple(outs), tuple(exp.results[:n_out]))
            if why:
                fails.append(f"invariant check of {spec.name}: {why}" if detail else
                             f"the outputs break {spec.name}'s invariants (details withheld on hidden shapes)")
    scales = exp.scales or [None] * len(exp.parts)
    for p, g, r, s in list(zip(exp.parts, got, exp.results, scales))[start:]:
        tol = cx.tolerance_for(spec, p.dtype, in_dtype)
        st = cx.compare(g.to(r.device), r, tol, scale=s)
        if not st.exact:
            stats.append(st)
        if not st.passed:
            fails.append(label(spec, p) + st.describe(tol, detail=detail))
    return ("; ".join(fails) or None), stats


def passes(spec: OperatorSpec, got: list, exp: Expected, in_dtype: str) -> bool:
    return judge(spec, got, exp, in_dtype)[0] is None


def describe_unchanged_rule(spec: OperatorSpec) -> str:
    """What the digest check adds for an operator that writes some arguments in place."""
    if not spec.mutates:
        return ""
    return f" (only {', '.join(spec.mutates)} may be written: the operator's MUTATES)"


def result_tensors(ret: Any, spec: OperatorSpec, inputs: dict) -> list | None:
    """The tensors a well-formed return value and the mutated arguments make up (for the stream snapshot),
    or None when the return value has the wrong form (its problem is reported elsewhere)."""
    tensors, problem = returned(ret, spec)
    if problem is not None:
        return None
    return tensors + [inputs[m] for m in spec.mutates]
