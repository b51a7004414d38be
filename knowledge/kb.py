"""The knowledge base in one directory: `catalog.sqlite` (catalogue + FTS5) and `vectors/` (chromadb).

Everything works without the vector side: when chromadb, sentence-transformers or the model
is missing (or `vectors=False`), one warning line is logged and retrieval uses keywords only.
Paths come in as arguments; this package reads no environment variables.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from knowledge import indexer
from knowledge.catalog import Catalog, SyncCounts
from knowledge.indexer import FileDoc, Progress
from knowledge.layers import LAYERS, check_layer, project_files
from knowledge.retrieve import FUSION_WEIGHTS, Hit, search

log = logging.getLogger("aka.knowledge")

CATALOG_FILE = "catalog.sqlite"
# Folder names too common to treat as a project name when hiding provenance.
GENERIC_DIR_NAMES = frozenset({"src", "lib", "libs", "code", "repo", "main", "master", "python", "kernels",
                               "kernel", "ops", "csrc", "triton", "torch", "models", "layers", "notes", "docs",
                               "reference", "api", "tmp", "test", "tests", "examples", "benchmarks"})
VECTOR_DIR = "vectors"


@dataclass(frozen=True)
class BuildReport:
    counts: SyncCounts
    embedded: int
    vectors_deleted: int
    vector_status: str
    seconds: float
    first_build: bool

    def summary(self) -> str:
        c = self.counts
        return (f"{c.added} added, {c.changed} changed, {c.removed} removed, {c.unchanged} unchanged chunks; "
                f"{self.embedded} embedded, {self.vectors_deleted} vectors dropped; vectors: {self.vector_status}; "
                f"{self.seconds:.1f} s")


@dataclass(frozen=True)
class ReferenceFile:
    """A whole reference-layer file whose launcher is named after an operator."""

    source: str
    text: str
    launchers: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)


class KnowledgeBase:
    def __init__(self, directory: Path, *, vectors: bool = True, model_path: Path | None = None):
        """`vectors=False` is the real switch for a machine without the vector stack: the store is
        never opened, exactly as when chromadb cannot be imported."""
        self.directory = Path(directory)
        self.catalog = Catalog(self.directory / CATALOG_FILE)
        self._want_vectors = vectors
        self._model_path = model_path
        self._store = None
        self._vector_error: str | None = None

    def close(self) -> None:
        self.catalog.close()

    # ------------------------------------------------------------ vector side, opened lazily

    def vector_store(self):
        """The open VectorStore, or None (after one warning) when it cannot be used here."""
        if self._store is not None or self._vector_error is not None:
            return self._store
        from knowledge.store import VectorStore, VectorUnavailable
        try:
            if not self._want_vectors:
                raise VectorUnavailable("vector backend switched off (vectors=False)")
            self._store = VectorStore(self.directory / VECTOR_DIR, self._model_path)
        except VectorUnavailable as e:
            self._vector_error = str(e)
            log.warning("knowledge base: vector search unavailable (%s); using keyword search only", e)
        return self._store

    @property
    def vector_status(self) -> str:
        if self._store is not None:
            return "ready"
        return f"off ({self._vector_error})" if self._vector_error else "not opened"

    def _sync_vectors(self, progress: Progress | None) -> tuple[int, int]:
        if progress is not None and self._want_vectors and self._store is None and self._vector_error is None:
            progress("loading embedding model", 0, 1)
        store = self.vector_store()
        if progress is not None and store is not None:
            progress("loading embedding model", 1, 1)
        if store is None:
            return 0, 0
        return indexer.sync_vectors(self.catalog, store, progress)

    # ------------------------------------------------------------ indexing

    def build(self, project_root: Path, include_api: bool = True,
              progress: Progress | None = None) -> BuildReport:
        """Index the project's notes and reference kernels, the api layer, and every root added
        before; incremental by hash."""
        start = time.perf_counter()
        first = self.catalog.info("built_at") is None
        project_root = Path(project_root).resolve()
        docs = [FileDoc(layer, p, p.relative_to(project_root).as_posix()) for layer, p in project_files(project_root)]
        counts = indexer.index_files(self.catalog, docs, "project", progress)
        if include_api:
            if progress is not None:
                progress("extracting api", 0, 1)
            from knowledge.api_extract import api_documents
            counts += indexer.index_chunk_groups(self.catalog, api_documents(), "api", "api")
            if progress is not None:
                progress("extracting api", 1, 1)
        for path, layer in self.catalog.roots():
            counts += self._index_root(Path(path), layer, progress)
        embedded, dropped = self._sync_vectors(progress)
        self.catalog.set_info("built_at", time.strftime("%Y-%m-%d %H:%M:%S"))
        return BuildReport(counts, embedded, dropped, self.vector_status, time.perf_counter() - start, first)

    def add(self, path: Path, layer: str, progress: Progress | None = None) -> BuildReport:
        """Register a file or directory (indexed in place, never copied) and index it now."""
        check_layer(layer)
        start = time.perf_counter()
        root = Path(path).expanduser().resolve()
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist; pass a file or a directory to index")
        self.catalog.add_root(str(root), layer)
        counts = self._index_root(root, layer, progress)
        embedded, dropped = self._sync_vectors(progress)
        return BuildReport(counts, embedded, dropped, self.vector_status, time.perf_counter() - start, False)

    def _index_root(self, root: Path, layer: str, progress: Progress | None) -> SyncCounts:
        if not root.exists():
            log.warning("knowledge base: added root %s is missing; its chunks are kept until it returns", root)
            return SyncCounts()
        return indexer.index_files(self.catalog, indexer.root_documents(root, layer), str(root), progress)

    def add_source(self, text: str, layer: str = "reference", source: str = "",
                   meta: dict[str, Any] | None = None, embed: bool = True) -> SyncCounts:
        """Index one text that has no file (an accepted kernel from the audit trail). Calling again
        with the same `source` replaces it; unchanged text is not re-embedded. `embed=False` leaves
        the embedding to the next build (for bulk additions right before one)."""
        check_layer(layer)
        if not source:
            raise ValueError("add_source needs a source name, e.g. 'accepted/rms_norm/<hash>.py'")
        if not PurePosixPath(source).suffix:
            source += ".py" if "def " in text else ".md"
        counts = indexer.index_document(self.catalog, text, source, layer, "text", meta=meta or {}, keep_text=True)
        if embed and (counts.added or counts.changed or counts.removed):
            self._sync_vectors(None)
        return counts

    # ------------------------------------------------------------ reading

    def search(self, text: str, k: int = 5, layers: tuple[str, ...] | None = None,
               mode: str = "hybrid", weights: tuple[float, float] = FUSION_WEIGHTS) -> list[Hit]:
        for layer in layers or ():
            check_layer(layer)
        vectors = self.vector_store() if mode != "keyword" else None
        layers = tuple(layers) if layers else None
        try:
            return search(self.catalog, vectors, text, k, layers, mode, weights=weights)
        except Exception as e:
            if vectors is None:
                raise
            # A broken vector index must not take retrieval down with it: warn once, use keywords.
            self._store, self._vector_error = None, f"query failed: {type(e).__name__}: {e}"
            log.warning("knowledge base: vector search failed (%s); using keyword search only", e)
            return search(self.catalog, None, text, k, layers, mode)

    def reference_files(self, op_name: str) -> list[ReferenceFile]:
        """Whole reference-layer files with a launcher named `op_name` (the search proposer's
        alternatives), read from where they are indexed."""
        out = []
        for src in self.catalog.sources(layer="reference"):
            if op_name not in src.launchers:
                continue
            text = src.text
            if text is None and src.path:
                try:
                    text = Path(src.path).read_text(errors="replace")
                except OSError:
                    continue
            if text:
                out.append(ReferenceFile(src.source, text, src.launchers, src.meta))
        return out

    def project_names(self) -> tuple[str, ...]:
        """Names of added checkouts (their folder names), hidden with the built-in project names
        when provenance is hidden; generic folder names are left out."""
        names = {Path(p).name for p, _ in self.catalog.roots()}
        return tuple(sorted(n for n in names if len(n) >= 3 and n.lower() not in GENERIC_DIR_NAMES))

    def api_titles(self) -> list[str]:
        return self.catalog.titles("api")

    def stats(self) -> dict[str, Any]:
        counts = self.catalog.counts()
        store = self._store
        return {
            "directory": str(self.directory),
            "layers": {layer: counts.get(layer, {"chunks": 0, "sources": 0}) for layer in LAYERS},
            "roots": self.catalog.roots(),
            "built_at": self.catalog.info("built_at"),
            "vectors": self.vector_status,
            "vector_count": store.count() if store is not None else None,
            "catalog_bytes": sum(p.stat().st_size for p in self.directory.glob(CATALOG_FILE + "*")),
        }
