"""The three knowledge layers, what files each accepts, and where the project's own content lives.

- reference: kernel source (our seed kernels, the honest candidate corpus, accepted kernels,
  any checkout a user adds such as vLLM). Only files that define Triton kernels are indexed,
  so adding a large repository does not flood the index with unrelated Python.
- notes: optimization knowledge we write ourselves (knowledge/notes/*.md).
- api: extracted from installed packages (triton.language, Inductor's Triton templates), plus
  any documentation a user adds.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LAYERS = ("reference", "notes", "api")

# File suffixes each layer indexes when a directory is added.
LAYER_SUFFIXES: dict[str, tuple[str, ...]] = {
    "reference": (".py", ".jinja"),
    "notes": (".md", ".txt"),
    "api": (".py", ".md", ".jinja", ".txt"),
}

# Directories never worth walking into (build outputs, VCS data, virtual environments).
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv",
                       "build", "dist", ".tox", ".mypy_cache", ".pytest_cache", ".eggs"})

# A file larger than this is generated or vendored, not something a prompt should quote.
MAX_FILE_BYTES = 1_000_000


def check_layer(name: str) -> str:
    if name not in LAYERS:
        raise ValueError(f"unknown knowledge layer {name!r}; layers: {', '.join(LAYERS)}")
    return name


def accepts_file(layer: str, path: Path, text: str | None = None) -> bool:
    """Whether `path` belongs in `layer` when it is found under an added directory.

    `text` is the file's content when already read; the reference layer needs it to tell a
    kernel file from other Python.
    """
    check_layer(layer)
    name = path.name
    if not any(name.endswith(s) for s in LAYER_SUFFIXES[layer]):
        return False
    if layer == "reference" and text is not None:
        if name.endswith(".jinja"):
            return "tl." in text
        return "triton.jit" in text or "@jit" in text
    return True


@dataclass(frozen=True)
class ProjectSource:
    """One group of the project's own files: a folder and a glob, indexed into one layer."""

    layer: str
    folder: str          # relative to the project root
    pattern: str         # glob inside the folder


# What `aka kb build` indexes from the project checkout, besides the api layer.
PROJECT_SOURCES = (
    ProjectSource("notes", "knowledge/notes", "*.md"),
    ProjectSource("reference", "benchmarks/operators", "*/seed.py"),
    ProjectSource("reference", "tests/sandbox/honest", "*.py"),
)


def project_files(project_root: Path) -> list[tuple[str, Path]]:
    """(layer, path) for every project file `aka kb build` indexes, sorted for stable order."""
    out: list[tuple[str, Path]] = []
    for src in PROJECT_SOURCES:
        folder = project_root / src.folder
        if folder.is_dir():
            out.extend((src.layer, p) for p in sorted(folder.glob(src.pattern)) if p.is_file())
    return out


def walk_files(root: Path, layer: str) -> list[Path]:
    """Files under `root` (a file or a directory) that `layer` would index, sorted."""
    check_layer(layer)
    if root.is_file():
        return [root]
    found: list[Path] = []
    for p in sorted(root.rglob("*")):
        if any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(root).parts[:-1]):
            continue
        if p.is_file() and accepts_file(layer, p) and p.stat().st_size <= MAX_FILE_BYTES:
            found.append(p)
    return found
