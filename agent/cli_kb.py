"""`aka kb`: build, extend, query and inspect the knowledge base ($AKA_HOME/kb by default)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

app = typer.Typer(help="Knowledge base: reference kernels, our notes, and the Triton/Inductor API.",
                  no_args_is_help=True)
console = Console()

KB_DIR_HELP = "Knowledge-base directory (default: the config's home/kb, i.e. $AKA_HOME/kb)."


def _kb_dir(kb_dir: Optional[Path]) -> Path:
    if kb_dir is not None:
        return kb_dir
    from agent.config import load_config
    return load_config().kb_dir


def _open(kb_dir: Optional[Path], vectors: bool):
    from knowledge.kb import KnowledgeBase
    return KnowledgeBase(_kb_dir(kb_dir), vectors=vectors)


def _check_layer(layer: Optional[str]) -> Optional[str]:
    from knowledge.layers import LAYERS
    if layer is not None and layer not in LAYERS:
        raise typer.BadParameter(f"unknown layer {layer!r}; choose one of {', '.join(LAYERS)}")
    return layer


class _Bar:
    """Adapts the knowledge package's (task, done, total) callback to one rich bar per task."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.tasks: dict[str, int] = {}

    def __call__(self, task: str, done: int, total: int) -> None:
        if task not in self.tasks:
            self.tasks[task] = self.progress.add_task(task, total=max(total, 1))
        self.progress.update(self.tasks[task], completed=done, total=max(total, 1))


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)


@app.command()
def build(kb_dir: Optional[Path] = typer.Option(None, "--kb-dir", help=KB_DIR_HELP),
          api: bool = typer.Option(True, "--api/--no-api", help="Extract the api layer from installed packages."),
          vectors: bool = typer.Option(True, "--vectors/--no-vectors", help="Embed chunks (needs chromadb)."),
          project_root: Optional[Path] = typer.Option(None, help="Project checkout to index (default: this one)."),
          audit: Optional[Path] = typer.Option(None, help="Audit database whose accepted kernels join the "
                                               "reference layer (default: the config's audit.db; --audit '' skips)")):
    """Index our notes, seed kernels and honest candidates, accepted kernels from the audit trail,
    the api layer, and every added path. Incremental: unchanged chunks are not re-embedded;
    removed ones are deleted."""
    from agent.config import PROJECT_ROOT, load_config
    from agent.retrieval import index_accepted_kernels
    audit_db = load_config().audit_db if audit is None else audit
    kb = _open(kb_dir, vectors)
    try:
        accepted = index_accepted_kernels(kb, audit_db) if str(audit_db) not in ("", ".") else 0
        with _progress() as progress:
            report = kb.build(project_root or PROJECT_ROOT, include_api=api, progress=_Bar(progress))
    finally:
        kb.close()
    console.print(f"[bold]kb build[/bold] {kb.directory}: " + report.summary()
                  + (f"; {accepted} accepted kernels from {audit_db}" if accepted else ""), highlight=False)


@app.command()
def add(path: Path = typer.Argument(..., help="File or directory, indexed in place (never copied)."),
        layer: str = typer.Option("reference", "--layer", "-l", help="reference | notes | api"),
        kb_dir: Optional[Path] = typer.Option(None, "--kb-dir", help=KB_DIR_HELP),
        vectors: bool = typer.Option(True, "--vectors/--no-vectors", help="Embed chunks (needs chromadb).")):
    """Add a path to a layer (e.g. a local vLLM checkout to `reference`); later builds re-scan it."""
    _check_layer(layer)
    if not path.exists():
        raise typer.BadParameter(f"{path} does not exist; pass a file or a directory")
    kb = _open(kb_dir, vectors)
    try:
        with _progress() as progress:
            report = kb.add(path, layer, progress=_Bar(progress))
    finally:
        kb.close()
    console.print(f"[bold]kb add[/bold] {path.resolve()} -> {layer}: " + report.summary(), highlight=False)


@app.command()
def query(text: str = typer.Argument(..., help="What to look for: an error, a bottleneck, an API question."),
          layer: Optional[str] = typer.Option(None, "--layer", "-l", help="Only this layer."),
          k: int = typer.Option(5, "-k", min=1, help="Number of results."),
          mode: str = typer.Option("hybrid", help="hybrid | keyword | vector"),
          full: bool = typer.Option(False, help="Print whole chunks instead of their first lines."),
          kb_dir: Optional[Path] = typer.Option(None, "--kb-dir", help=KB_DIR_HELP),
          vectors: bool = typer.Option(True, "--vectors/--no-vectors", help="Use the vector index.")):
    """Search the knowledge base and print the best chunks with their layer and source."""
    _check_layer(layer)
    from knowledge.retrieve import MODES
    if mode not in MODES:
        raise typer.BadParameter(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    from knowledge.kb import CATALOG_FILE
    directory = _kb_dir(kb_dir)
    if not (directory / CATALOG_FILE).is_file():   # say so now, not after loading the embedding model (~11 s)
        console.print(f"no knowledge base at {directory}; run `aka kb build` first", markup=False, highlight=False)
        raise typer.Exit(1)
    kb = _open(directory, vectors)
    try:
        hits = kb.search(text, k=k, layers=(layer,) if layer else None, mode=mode)
    finally:
        kb.close()
    if not hits:
        console.print("no results (is the knowledge base built? run `aka kb build`)")
        raise typer.Exit(1)
    for i, h in enumerate(hits, start=1):
        console.print(Text(f"{i}. [{h.layer}] {h.chunk_id}  (score {h.score:.4f})", style="bold"))
        body = h.text if full else "\n".join(h.text.splitlines()[:8])
        console.print(body, markup=False, highlight=False)
        console.print()


@app.command()
def stats(kb_dir: Optional[Path] = typer.Option(None, "--kb-dir", help=KB_DIR_HELP),
          vectors: bool = typer.Option(True, "--vectors/--no-vectors", help="Open the vector index to count it.")):
    """Chunks and sources per layer, added paths, and the vector index's state."""
    kb = _open(kb_dir, vectors)
    try:
        if vectors:
            kb.vector_store()
        s = kb.stats()
    finally:
        kb.close()
    table = Table(title=f"knowledge base {s['directory']}")
    table.add_column("layer")
    table.add_column("chunks", justify="right")
    table.add_column("sources", justify="right")
    for layer, c in s["layers"].items():
        table.add_row(layer, str(c["chunks"]), str(c["sources"]))
    console.print(table)
    console.print(f"built: {s['built_at'] or 'never'}; vectors: {s['vectors']}"
                  + (f", {s['vector_count']} embedded" if s["vector_count"] is not None else ""),
                  markup=False, highlight=False)
    for path, layer in s["roots"]:
        console.print(f"added: {path} -> {layer}", markup=False, highlight=False)
