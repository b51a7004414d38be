"""Turning what the loop saw into retrieval text: condensed errors, error kinds, API names.

A Triton traceback is mostly frames and paths; the signal is the exception line, the offending
source line (the one above the caret), and any `tl.` names. Those go first in the query, since
the embedding model reads only its first ~256 word pieces.
"""
from __future__ import annotations

import difflib
import re

ERROR_KINDS = ("compile", "runtime", "correctness")

_FRAME = re.compile(r'^\s*File ".*", line \d+')
_CARET = re.compile(r"^\s*\^+\s*$")
_SIGNAL = re.compile(r"(Error|Exception|error:|unsupported|must|cannot|can't|invalid|out of resource|"
                     r"illegal|mismatch|assert|expected|not supported|no attribute|exceeds|overflow)", re.I)
_COMPILE_MARKS = ("CompilationError", "UnsupportedLanguageConstruct", "triton.compiler", "PTXASError",
                  "MLIR", "must be of type tl.constexpr", "has no attribute")
_RUNTIME_MARKS = ("OutOfResources", "out of resource", "illegal memory access", "CUDA error",
                  "misaligned address", "an illegal instruction", "allocator was set")
_QUALIFIED = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Z]\w*)")
_POSITION = re.compile(r"\bat \d+:\d+:")
_API_NAME = re.compile(r"\b(?:tl|triton\.language)\.([A-Za-z_]\w*)|no attribute '([A-Za-z_]\w*)'")


def condense_error(text: str, limit: int = 700) -> str:
    """The informative lines of an error or traceback, last ones kept when over `limit`."""
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    keep: list[str] = []
    for i, ln in enumerate(lines):
        if not ln.strip() or _FRAME.match(ln) or _CARET.match(ln):
            continue
        follows_caret = i + 1 < len(lines) and _CARET.match(lines[i + 1])
        if follows_caret or _SIGNAL.search(ln) or i == len(lines) - 1:
            stripped = ln.strip()
            if stripped not in keep:
                keep.append(stripped)
    if not keep:
        keep = [ln.strip() for ln in lines if ln.strip()][-3:]
    # Module paths of exception classes and "at 12:4:" positions are the same in every error.
    out = _POSITION.sub("", _QUALIFIED.sub(r"\1", "\n".join(keep))).strip()
    return out[-limit:] if len(out) > limit else out


def error_kind(error: str | None, failed_stage: str | None = None) -> str | None:
    if failed_stage in ("lint", "compile"):
        return "compile"
    text = error or ""
    if any(m in text for m in _COMPILE_MARKS) or re.search(r"\bat \d+:\d+:", text):
        return "compile"
    if any(m in text for m in _RUNTIME_MARKS):
        return "runtime"
    if failed_stage == "correctness":
        return "correctness"
    if failed_stage in ("dsl", "timing") or text:
        return "runtime"
    return None


ERROR_LABELS = {"compile": "compile error", "runtime": "runtime error",
                "correctness": "wrong results (correctness failure)"}


def error_query_text(error: str, failed_stage: str | None = None) -> tuple[str, str | None]:
    """(query text, error kind) for an error: its kind as words, then its informative lines."""
    kind = error_kind(error, failed_stage)
    return f"{ERROR_LABELS.get(kind or '', 'error')}: {condense_error(error)}", kind


def api_names_in(text: str) -> list[str]:
    """`tl.` names an error mentions, including the one in "has no attribute 'x'"."""
    names: dict[str, None] = {}
    for a, b in _API_NAME.findall(text):
        names.setdefault(a or b, None)
    return list(names)


def close_api_titles(text: str, titles: list[str], n: int = 2) -> list[str]:
    """API titles (e.g. "tl.minimum") closest to each `tl.` name the error mentions, so a
    misspelled or non-existent name ("tl.minimium", "tl.bf16") still finds the real entry."""
    short = {t.split(".", 1)[1]: t for t in titles if t.startswith("tl.")}
    found: dict[str, None] = {}
    for name in api_names_in(text):
        if name in short:
            found.setdefault(short[name], None)
            continue
        for match in difflib.get_close_matches(name, list(short), n=n, cutoff=0.6):
            found.setdefault(short[match], None)
    return list(found)
