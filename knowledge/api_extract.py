"""The api layer, extracted from the installed packages at build time.

- every public `triton.language` name: functions with signature and docstring, classes with
  their constructor, and one entry listing the dtypes;
- a few runtime entry points kernels need (triton.jit, autotune, Config, cdiv, set_allocator,
  TensorDescriptor);
- the Triton templates that ship inside torch (Inductor's *.jinja templates that use `tl.`,
  and its `triton_helpers.py` device functions), found in site-packages without importing torch.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from pathlib import Path

from knowledge.ingest import Chunk, chunk_document

# Internal parameters the Triton frontend injects; no kernel author passes them.
_HIDDEN_PARAMS = ("_semantic", "_generator", "_builder")

RUNTIME_API = (
    "triton.jit", "triton.autotune", "triton.heuristics", "triton.Config", "triton.cdiv",
    "triton.next_power_of_2", "triton.set_allocator", "triton.tools.tensor_descriptor.TensorDescriptor",
)

# Where Triton source lives inside torch's package, relative to the torch directory.
INDUCTOR_TEMPLATE_GLOBS = ("_inductor/**/*.jinja", "_inductor/runtime/triton_helpers.py")


def _unwrap(obj):
    """JITFunction / InterpretedFunction wrap the Python function; docs and signature live there."""
    for _ in range(3):
        inner = getattr(obj, "fn", None)
        if inner is None or not callable(inner):
            break
        obj = inner
    return obj


def _signature(obj) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = [p for name, p in sig.parameters.items() if name not in _HIDDEN_PARAMS]
    text = str(sig.replace(parameters=params))
    return re.sub(r"<([\w.]+): (\d+)>", r"\1", text)     # enum reprs -> their names


def _clean_doc(doc: str) -> str:
    """Turn reStructuredText roles into plain backticks; the prompt is not rendered."""
    doc = re.sub(r":(?:code|py:\w+|func|class|attr):`([^`]*)`", r"`\1`", doc)
    doc = doc.replace(".. code-block:: python", "").replace(".. highlight:: python", "")
    return re.sub(r"\n{3,}", "\n\n", doc).strip()


def _entry(prefix: str, name: str, obj) -> Chunk | None:
    short = "tl" if prefix == "triton.language" else prefix
    target = _unwrap(obj)
    doc = _clean_doc(inspect.getdoc(target) or "")
    if inspect.isclass(target):
        init = _signature(target.__init__).replace("(self, ", "(").replace("(self)", "()")
        methods = sorted(m for m, v in vars(target).items() if not m.startswith("_") and callable(v))
        body = f"class {short}.{name}{init}\n\n{doc}"
        if methods:
            body += "\n\nMethods: " + ", ".join(methods)
    elif callable(target):
        body = f"{short}.{name}{_signature(target)}\n\n{doc}"
    else:
        return None
    return Chunk(prefix, f"{short}.{name}", body.strip(), "api", "api")


def triton_language_chunks() -> list[Chunk]:
    import triton.language as tl

    names = sorted(getattr(tl, "__all__", None) or [n for n in dir(tl) if not n.startswith("_")])
    chunks: list[Chunk] = []
    dtypes: list[str] = []
    for name in names:
        obj = getattr(tl, name, None)
        if obj is None or inspect.ismodule(obj):
            continue
        if isinstance(obj, tl.dtype):
            dtypes.append(name)
            continue
        entry = _entry("triton.language", name, obj)
        if entry is not None:
            chunks.append(entry)
    if dtypes:
        listing = ", ".join(f"tl.{d}" for d in dtypes)
        chunks.append(Chunk("triton.language", "tl dtypes",
                            f"Data types in triton.language (use exactly these names): {listing}.\n"
                            f"Cast with x.to(tl.float32); pointer element types follow the tensor's dtype.",
                            "api", "api"))
    return chunks


def triton_runtime_chunks() -> list[Chunk]:
    chunks = []
    for dotted in RUNTIME_API:
        module_name, _, attr = dotted.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            continue     # an older or newer triton without this entry point
        entry = _entry(module_name, attr, obj)
        if entry is not None:
            chunks.append(Chunk("triton", dotted, entry.text, "api", "api"))
    return chunks


def torch_dir() -> Path | None:
    """torch's package directory, found without importing torch (which takes seconds)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def inductor_template_files(root: Path | None = None) -> list[Path]:
    """Inductor's Triton templates: *.jinja files that use `tl.`, plus its Triton helpers."""
    root = root or torch_dir()
    if root is None:
        return []
    found = []
    for pattern in INDUCTOR_TEMPLATE_GLOBS:
        for p in sorted(root.glob(pattern)):
            if p.is_file() and "tl." in p.read_text(errors="replace"):
                found.append(p)
    return found


def inductor_source_name(path: Path, root: Path) -> str:
    return f"torch/{path.relative_to(root).as_posix()}"


def inductor_template_chunks(root: Path | None = None) -> list[Chunk]:
    root = root or torch_dir()
    chunks: list[Chunk] = []
    for p in inductor_template_files(root):
        chunks.extend(chunk_document(p.read_text(errors="replace"), inductor_source_name(p, root), "api"))
    return chunks


def api_documents() -> dict[str, list[Chunk]]:
    """All api-layer chunks grouped by source, the unit re-indexing compares."""
    groups: dict[str, list[Chunk]] = {}
    for c in triton_language_chunks() + triton_runtime_chunks() + inductor_template_chunks():
        groups.setdefault(c.source, []).append(c)
    return groups
