"""Feedback and prompts: an EvalResult, counter diagnoses and retrieved knowledge -> text.

`build_feedback` turns one evaluation into compact text a proposer can act on: the verdict and
failed stage, the failing line of a lint/compile/correctness error, per-shape time, roofline time,
attainment and bound, compile notes (registers, spills) and the counters' short diagnoses.
Hold-out shapes never appear in it: they are reported only as "N hidden shapes passed, M failed",
and any reason that names a hold-out shape or its dims is replaced by a note that details are
withheld (a proposer that saw them could special-case them).

`build_prompt` renders the chat messages of one proposal from configs/prompts/*.jinja: a system
message with the instructions and the operator's contract (stable across iterations, which is
what the anthropic client marks for prompt caching) and a user message with the incumbent kernel,
the feedback, the snippets and the unmasked memory records.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from agent.config import PROJECT_ROOT
from agent.holdout import HIDDEN_NOTE, HoldoutFilter
from agent.types import OperatorContract, ProposalContext
from sandbox.verdict import EvalResult, ShapeResult

PROMPTS_DIR = PROJECT_ROOT / "configs" / "prompts"
MAX_REASONS = 6
MAX_REASON_CHARS = 400
# Frames in these paths are the harness or a library, never the candidate's own line.
_LIBRARY_PATH = re.compile(r"site-packages|dist-packages|/lib/python3|/triton/|/torch/|/sandbox/|<frozen")


@lru_cache(maxsize=4)
def _environment(templates_dir: str):
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                              autoescape=False)


def render(template: str, templates_dir: str | Path | None = None, **values: Any) -> str:
    env = _environment(str(templates_dir or PROMPTS_DIR))
    return env.get_template(template).render(**values).strip() + "\n"


# --- hold-out hiding: agent/holdout.py (one redaction for feedback, lessons and proposer contexts)

# --- failing line ---------------------------------------------------------------------------------

_TRACE_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n[ \t]+([^\n]+)')
_EXC_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit)\w*)(?::\s*(.*))?$", re.M)
_TRITON_AT = re.compile(r"at (\d+):(\d+):\n((?:[^\n]*\n)+?)[ \t]*\^+[ \t]*\n?", re.M)


def failing_line(text: str) -> str | None:
    """The candidate's own line that failed, with the error, from a traceback or a Triton compile error."""
    if not text:
        return None
    m = list(_TRITON_AT.finditer(text))
    if m:
        last = m[-1]
        code = [ln for ln in last.group(3).splitlines() if ln.strip()]
        after = text[last.end():].strip().splitlines()
        message = after[0].strip() if after else ""
        kernel = re.match(r"\s*def\s+(\w+)", code[0]) if code else None
        line = f"{kernel.group(1) if kernel else 'kernel'} line {last.group(1)}: {code[-1].strip() if code else ''}"
        return f"{line} -> {message}"[:MAX_REASON_CHARS] if message else line[:MAX_REASON_CHARS]
    frames = [f for f in _TRACE_FRAME.finditer(text) if not _LIBRARY_PATH.search(f.group(1))]
    excs = list(_EXC_LINE.finditer(text))
    exc = excs[-1].group(0).strip() if excs else ""
    if frames:
        f = frames[-1]
        where = f"line {f.group(2)} in {f.group(3).strip()}: {f.group(4).strip()}"
        return (f"{where} -> {exc}" if exc else where)[:MAX_REASON_CHARS]
    return exc[:MAX_REASON_CHARS] or None


# --- per-shape rows and compile notes -------------------------------------------------------------

def _fmt(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def _row_text(s: ShapeResult, result: EvalResult, hide: HoldoutFilter) -> str:
    from agent.report import shape_status
    interpreter = result.interpreter
    if s.error:
        return "FAILED: " + (HIDDEN_NOTE if hide.leaks(s.error) else s.error[:MAX_REASON_CHARS])
    status = shape_status(result, s)
    if status != "ok":        # stopped before any shape ran: never "passed"
        return status
    parts = []
    if interpreter or s.timing_mode == "interpreter":
        parts.append("passed (interpreter: no timing)")
    else:
        parts.append(f"t={_fmt(s.t_us, '.2f')} us, roof={_fmt(s.t_roof_us, '.2f')} us, "
                     f"att={_fmt(s.attainment, '.3f')}")
        if s.bound:
            parts.append(f"{s.bound}-bound")
        if s.timing_mode == "eager":
            parts.append("timed eagerly (no CUDA graph)")
        if s.suspect:
            parts.append("suspect: faster than the roofline, re-measured")
    if s.max_rel_err is not None:
        parts.append(f"max_rel_err={s.max_rel_err:.2e}")
    return ", ".join(parts)


_COMPILE_KEYS = (("registers", "registers"), ("n_regs", "registers"), ("spills_bytes", "spilled bytes"),
                 ("spill_bytes", "spilled bytes"), ("n_spills", "spills"), ("shared_bytes", "shared bytes"),
                 ("shared", "shared bytes"), ("features", "features"))


def _serial_loads_note(facts: Any) -> str | None:
    """The compile gate's serial-loads fact as a hint, when some load outside a loop waits in program order
    behind a global store or a barrier (sandbox.compile_child.serial_loads); None otherwise."""
    if not isinstance(facts, dict):
        return None
    n, store, barrier = (int(facts.get(k) or 0) for k in ("global_loads", "after_first_store", "after_first_barrier"))
    if not store and not barrier:
        return None
    where = " and ".join(part for part in (f"{store} after the first global store" if store else "",
                                           f"{barrier} after the first barrier" if barrier else "") if part)
    return (f"serial loads: of {n} global loads outside loops, {where} in program order (in-order issue holds "
            f"each one back a memory round trip; issue the loads that do not depend on the store or the "
            f"reduction first)")


def compile_notes(compile_info: dict[str, Any], limit: int = 6) -> list[str]:
    """One line per compiled kernel, from sandbox.compile's report ({"kernels": [{name, registers,
    spills_bytes, shared_bytes, features}], "target": ...}) or a {kernel: {...}} mapping."""
    kernels = compile_info.get("kernels")
    if isinstance(kernels, list):
        items = [(str(k.get("name", "?")), k) for k in kernels if isinstance(k, dict)]
    else:
        items = [(str(name), info) for name, info in compile_info.items() if isinstance(info, dict)]
    notes = []
    for name, info in items[:limit]:
        fields = []
        for key, label in _COMPILE_KEYS:
            value = info.get(key)
            if value in (None, "", [], ()) or any(label == f.split("=")[0] for f in fields):
                continue
            fields.append(f"{label}={','.join(map(str, value)) if isinstance(value, (list, tuple)) else value}")
        serial = _serial_loads_note(info.get("serial_loads"))
        if serial:
            fields.append(serial)
        if fields:
            target = f" ({compile_info['target']})" if compile_info.get("target") and not notes else ""
            notes.append(f"{name}{target}: " + ", ".join(fields))
    if compile_info.get("note"):
        notes.append(str(compile_info["note"])[:MAX_REASON_CHARS])
    return notes


def _result_view(contract: OperatorContract | None, result: EvalResult) -> dict[str, Any]:
    hide = HoldoutFilter(result, contract)
    reasons, hidden_reason = [], False
    for reason in result.reasons:
        if hide.leaks(reason):
            hidden_reason = True
            continue
        reasons.append(reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + " ...")
    reasons = reasons[:MAX_REASONS - 1] + [HIDDEN_NOTE] if hidden_reason else reasons[:MAX_REASONS]
    line = None
    if result.failed_stage in ("lint", "compile", "correctness"):
        line = failing_line(result.stderr_tail) or next((failing_line(r) for r in result.reasons
                                                          if _TRACE_FRAME.search(r) or _TRITON_AT.search(r)), None)
        if line and hide.leaks(line):
            line = None
    hidden = [s for s in result.shapes if s.holdout]
    from agent.report import set_shares
    shares = set_shares(result.shapes)    # the weight the system prompt shows: share of the run's set
    return {
        "verdict": result.verdict, "failed_stage": result.failed_stage, "interpreter": result.interpreter,
        "reasons": reasons, "failing_line": line,
        "rows": [{"id": s.id, "dims": " ".join(f"{k}={v}" for k, v in s.dims.items()), "dtype": s.dtype,
                  "weight": shares.get(s.id), "text": _row_text(s, result, hide)}
                 for s in result.visible_shapes()],
        "hidden_total": len(hidden), "hidden_passed": sum(s.passed for s in hidden),
        "hidden_failed": sum(not s.passed for s in hidden),
        "weighted": result.weighted_attainment, "s_i": result.s_i, "dsl_share": result.dsl_share,
        "compile_notes": compile_notes(result.compile_info),
        "flags": [f for f in result.flags if not hide.leaks(f)],
    }


def build_feedback(contract: OperatorContract | None, result: EvalResult | None,
                   counters_diagnoses: list[str] | tuple[str, ...] = (),
                   templates_dir: str | Path | None = None) -> str:
    """Compact feedback on one evaluation; hold-out shapes appear only as counts."""
    view = _result_view(contract, result) if result is not None else None
    if result is not None:
        hide = HoldoutFilter(result, contract)
        counters_diagnoses = [d for d in counters_diagnoses if not hide.leaks(d)]
    return render("feedback.jinja", templates_dir, r=view, diagnoses=list(counters_diagnoses))


# --- prompts --------------------------------------------------------------------------------------

def _fence_for(text: str) -> str:
    """A backtick fence longer than any run inside the text, so the kernel cannot close it early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _contract_view(c: OperatorContract) -> dict[str, Any]:
    shapes = [{"id": s.get("id", "?"), "dtype": s.get("dtype", ""), "weight": s.get("weight"),
               "dims_text": " ".join(f"{k}={v}" for k, v in dict(s.get("dims", {})).items())}
              for s in c.shapes]
    return {"name": c.name, "signature": c.signature, "description": c.description,
            "arg_names": list(c.arg_names), "tolerances": c.tolerances, "shapes": shapes}


def system_message(contract: OperatorContract, templates_dir: str | Path | None = None) -> dict[str, str]:
    return {"role": "system", "content": render("system.jinja", templates_dir, c=_contract_view(contract))}


def build_prompt(ctx: ProposalContext, templates_dir: str | Path | None = None) -> list[dict[str, str]]:
    """Chat messages for one proposal: [system (instructions + contract), user (kernel + evidence)].
    Without an incumbent (`aka optimize --from-reference`) the user message asks for a first kernel
    written from the reference instead (configs/prompts/from_reference.jinja)."""
    if not ctx.incumbent_source.strip():
        return [system_message(ctx.contract, templates_dir), writing_message(ctx, templates_dir)]
    user = render("user.jinja", templates_dir, iteration=ctx.iteration, score=ctx.incumbent_score,
                  incumbent=ctx.incumbent_source, fence=_fence_for(ctx.incumbent_source),
                  feedback=ctx.feedback, snippets=list(ctx.snippets), memory=list(ctx.memory))
    return [system_message(ctx.contract, templates_dir), {"role": "user", "content": user}]


def writing_message(ctx: ProposalContext, templates_dir: str | Path | None = None) -> dict[str, str]:
    """The user message of a proposal that writes the first kernel from the contract and the reference."""
    from agent.from_reference import writing_documents
    view = {**_contract_view(ctx.contract), "reference": ctx.contract.reference,
            "outputs": list(ctx.contract.outputs), "output_layout": ctx.contract.output_layout}
    user = render("from_reference.jinja", templates_dir, c=view, iteration=ctx.iteration,
                  fence=_fence_for(ctx.contract.reference), feedback=ctx.feedback, snippets=list(ctx.snippets),
                  memory=list(ctx.memory), **writing_documents())
    return {"role": "user", "content": user}


def corrective_message(contract: OperatorContract, templates_dir: str | Path | None = None) -> dict[str, str]:
    """The one follow-up sent when a reply holds no kernel."""
    return {"role": "user", "content": render("corrective.jinja", templates_dir, name=contract.name,
                                              args=list(contract.arg_names))}
