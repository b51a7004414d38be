"""Incremental indexing: documents into the catalogue, then the vector store brought in line.

A document whose whole-text hash is unchanged is skipped before chunking; inside a changed
document only chunks whose hash changed are rewritten; documents that disappeared are removed.
The vector store is then diffed against the catalogue by chunk hash, so unchanged chunks are
never re-embedded and removed ones are deleted.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from knowledge.catalog import Catalog, SyncCounts
from knowledge.ingest import Chunk, chunk_document, content_hash, launchers_in
from knowledge.layers import accepts_file, check_layer, walk_files

log = logging.getLogger("aka.knowledge")

Progress = Callable[[str, int, int], None]     # (task, done, total)


@dataclass(frozen=True)
class FileDoc:
    layer: str
    path: Path
    source: str          # display name; the first half of each chunk id


def index_document(catalog: Catalog, text: str, source: str, layer: str, root: str,
                   path: str | None = None, meta: dict | None = None, keep_text: bool = False,
                   chunks: list[Chunk] | None = None) -> SyncCounts:
    check_layer(layer)
    doc_hash = content_hash(f"{layer}\n{text}")
    old = catalog.source(source)
    if old is not None and old.doc_hash == doc_hash and old.root == root and (meta is None or old.meta == meta):
        return SyncCounts(unchanged=catalog.chunk_count(source))
    chunks = chunks if chunks is not None else chunk_document(text, source, layer)
    return catalog.put_document(source, layer, root, doc_hash, chunks, launchers_in(chunks),
                                path=path, meta=meta, text=text if keep_text else None)


def index_files(catalog: Catalog, docs: list[FileDoc], root: str,
                progress: Progress | None = None) -> SyncCounts:
    """Index `docs` as the complete content of `root`: sources of that root not in `docs` go."""
    total = SyncCounts()
    kept = set()
    for i, doc in enumerate(docs):
        try:
            text = doc.path.read_text(errors="replace")
        except OSError as e:
            log.warning("knowledge base: skipped %s (%s)", doc.path, e)
            continue
        kept.add(doc.source)
        total += index_document(catalog, text, doc.source, doc.layer, root, path=str(doc.path))
        if progress is not None:
            progress(f"indexing {root}", i + 1, len(docs))
    for stale in catalog.sources(root=root):
        if stale.source not in kept:
            total += SyncCounts(removed=catalog.remove_document(stale.source))
    return total


def index_chunk_groups(catalog: Catalog, groups: dict[str, list[Chunk]], layer: str, root: str) -> SyncCounts:
    """Index documents that arrive already chunked (the api layer); stale sources of `root` go."""
    total = SyncCounts()
    for source, chunks in groups.items():
        text = "\n".join(c.hash for c in chunks)      # a document hash over its chunks
        total += index_document(catalog, text, source, layer, root, chunks=chunks)
    for stale in catalog.sources(root=root):
        if stale.source not in groups:
            total += SyncCounts(removed=catalog.remove_document(stale.source))
    return total


def root_documents(root: Path, layer: str) -> list[FileDoc]:
    """Files a user-added root contributes to `layer`, named `<root name>/<relative path>`."""
    docs = []
    for p in walk_files(root, layer):
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        if not accepts_file(layer, p, text):
            continue
        rel = p.name if root.is_file() else p.relative_to(root).as_posix()
        docs.append(FileDoc(layer, p, f"{root.name}/{rel}" if root.is_dir() else rel))
    return docs


def sync_vectors(catalog: Catalog, store, progress: Progress | None = None) -> tuple[int, int]:
    """Embed catalogue chunks the store lacks or holds with another hash; drop ones it no longer
    has. Returns (embedded, deleted)."""
    want = catalog.chunk_hashes()
    have = store.hashes()
    stale = [cid for cid, h in have.items() if want.get(cid) != h]
    missing = [cid for cid, h in want.items() if have.get(cid) != h]
    if stale:
        store.delete(stale)
    if missing:
        rows = catalog.chunks(missing)
        items = [(cid, rows[cid].embed_text(), rows[cid].layer, rows[cid].hash) for cid in missing if cid in rows]
        report = (lambda done, n: progress("embedding", done, n)) if progress is not None else None
        if report is not None:
            report(0, len(items))
        store.add(items, progress=report)
    return len(missing), len(stale)
