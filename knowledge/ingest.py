"""Chunking: a Triton kernel with its launcher, other Python by top-level def, markdown by heading.

A chunk's identity is `source::title` (stable across edits, used by the labelled retrieval set);
its content hash (layer, title and text) decides whether re-indexing must re-embed it.
"""
from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from knowledge.layers import check_layer

# Past this a chunk is split in parts: the embedding model reads only ~256 word pieces anyway,
# and a prompt cannot afford a whole file.
MAX_CHUNK_CHARS = 6000
# Plain text (Jinja templates, .txt) is cut into windows of about this size at blank lines.
TEXT_WINDOW_CHARS = 2500


@dataclass(frozen=True)
class Chunk:
    source: str                      # display path ("knowledge/notes/x.md", "triton.language", ...)
    title: str                       # kernel/function name, heading path, or API name
    text: str
    layer: str
    kind: str                        # kernel | def | module | section | api | template | text
    launchers: tuple[str, ...] = ()  # functions that launch this kernel (kernel chunks only)

    @property
    def chunk_id(self) -> str:
        return f"{self.source}::{self.title}"

    @property
    def hash(self) -> str:
        return content_hash(f"{self.layer}\n{self.title}\n{self.text}")

    def embed_text(self) -> str:
        """What the embedding model reads: the title first, since only the start is seen."""
        return f"{self.title}\n{self.text}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:20]


def chunk_document(text: str, source: str, layer: str) -> list[Chunk]:
    """Chunk one file or text by its kind, told by the source's suffix."""
    check_layer(layer)
    name = PurePosixPath(source).name
    if name.endswith(".py"):
        chunks = chunk_python(text, source, layer)
    elif name.endswith((".md", ".markdown")):
        chunks = chunk_markdown(text, source, layer)
    else:
        kind = "template" if name.endswith(".jinja") else "text"
        chunks = chunk_text(text, source, layer, kind=kind)
    return _unique_titles(_split_large(chunks))


# ---------------------------------------------------------------- Python

def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_jit(node: ast.AST) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return any(_dotted(d).split(".")[-1] == "jit" for d in node.decorator_list)


def _launched_kernels(node: ast.AST, kernels: set[str]) -> set[str]:
    """Kernels this def launches: `kernel[grid](...)`, also as `module.kernel[grid](...)`."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Subscript):
            name = _dotted(sub.func.value).split(".")[-1]
            if name in kernels:
                found.add(name)
    return found


def _segment(lines: list[str], node: ast.AST) -> str:
    """Source of a top-level def with its decorators and the comment block right above it."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return "\n".join(lines[start:node.end_lineno]).rstrip()


def chunk_python(text: str, source: str, layer: str) -> list[Chunk]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return chunk_text(text, source, layer, kind="text")
    lines = text.splitlines()
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    kernels = {n.name for n in defs if _is_jit(n)}
    launches = {n.name: _launched_kernels(n, kernels) for n in defs if not _is_jit(n)}
    launchers_of = {k: [n for n in defs if k in launches.get(n.name, ())] for k in kernels}

    chunks: list[Chunk] = []
    for node in defs:
        if node.name in kernels:
            parts = [_segment(lines, node)] + [_segment(lines, launcher) for launcher in launchers_of[node.name]]
            chunks.append(Chunk(source, node.name, "\n\n\n".join(parts), layer, "kernel",
                                tuple(n.name for n in launchers_of[node.name])))
        elif not launches.get(node.name):
            chunks.append(Chunk(source, node.name, _segment(lines, node), layer, "def"))

    rest = _module_level_text(tree, lines)
    if rest:
        chunks.insert(0, Chunk(source, "<module>", rest, layer, "module"))
    return chunks


def _module_level_text(tree: ast.Module, lines: list[str]) -> str:
    """Module docstring, constants and tunables (CONFIGS): everything outside defs and imports."""
    keep = [n for n in tree.body
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))]
    text = "\n".join("\n".join(lines[n.lineno - 1:n.end_lineno]) for n in keep).strip()
    return text if len(text) >= 40 else ""


# ---------------------------------------------------------------- Markdown

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def chunk_markdown(text: str, source: str, layer: str, split_level: int = 3) -> list[Chunk]:
    """One chunk per heading of level <= split_level; its title is the heading path."""
    sections: list[tuple[list[str], list[str]]] = []   # (heading path, lines)
    path: list[str] = []
    current: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m and len(m.group(1)) <= split_level:
            sections.append((list(path), current))
            level = len(m.group(1))
            path = path[:level - 1] + [""] * max(0, level - 1 - len(path)) + [m.group(2).strip()]
            current = [line]
        else:
            current.append(line)
    sections.append((list(path), current))

    chunks = []
    for heads, body in sections:
        content = "\n".join(body).strip()
        has_body = any(ln.strip() and not _HEADING.match(ln) for ln in body)
        if not content or not has_body:
            continue
        title = " > ".join(h for h in heads if h) or PurePosixPath(source).stem
        chunks.append(Chunk(source, title, content, layer, "section"))
    return chunks


# ---------------------------------------------------------------- plain text

def chunk_text(text: str, source: str, layer: str, kind: str = "text",
               window: int = TEXT_WINDOW_CHARS) -> list[Chunk]:
    """Windows of about `window` characters, cut at blank lines where possible."""
    blocks = re.split(r"\n\s*\n", text.strip())
    parts: list[str] = []
    current = ""
    for block in blocks:
        if current and len(current) + len(block) + 2 > window:
            parts.append(current)
            current = block
        else:
            current = f"{current}\n\n{block}" if current else block
    if current.strip():
        parts.append(current)
    name = PurePosixPath(source).name
    if len(parts) == 1:
        return [Chunk(source, name, parts[0], layer, kind)]
    return [Chunk(source, f"{name} [{i + 1}/{len(parts)}]", p, layer, kind) for i, p in enumerate(parts)]


# ---------------------------------------------------------------- helpers

def _split_large(chunks: list[Chunk]) -> list[Chunk]:
    out = []
    for c in chunks:
        if len(c.text) <= MAX_CHUNK_CHARS:
            out.append(c)
            continue
        pieces, current = [], []
        size = 0
        for line in c.text.splitlines():
            if current and size + len(line) + 1 > MAX_CHUNK_CHARS:
                pieces.append("\n".join(current))
                current, size = [], 0
            current.append(line[:MAX_CHUNK_CHARS])
            size += len(line) + 1
        pieces.append("\n".join(current))
        out.extend(Chunk(c.source, f"{c.title} [part {i + 1}/{len(pieces)}]", p, c.layer, c.kind, c.launchers)
                   for i, p in enumerate(pieces))
    return out


def _unique_titles(chunks: list[Chunk]) -> list[Chunk]:
    seen: dict[str, int] = {}
    out = []
    for c in chunks:
        n = seen.get(c.title, 0) + 1
        seen[c.title] = n
        out.append(c if n == 1 else Chunk(c.source, f"{c.title} #{n}", c.text, c.layer, c.kind, c.launchers))
    return out


def launchers_in(chunks: list[Chunk]) -> tuple[str, ...]:
    """Names of the functions in a file that launch one of its kernels (for `alternatives`)."""
    return tuple(sorted({name for c in chunks for name in c.launchers}))
