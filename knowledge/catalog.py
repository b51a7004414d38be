"""The knowledge base's SQLite file: what is indexed (sources, chunks, added roots) and the FTS5
keyword index over it, kept in one transaction so they never disagree.

The vector store is derived from this catalogue (`chunk_hashes()` is its to-do list), so a KB
built on a machine without chromadb gains its vectors on the first build where chromadb works.
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from knowledge import keyword
from knowledge.ingest import Chunk

SCHEMA = """
CREATE TABLE IF NOT EXISTS sources(
    source TEXT PRIMARY KEY,     -- display name, the first half of every chunk id
    layer TEXT NOT NULL,
    root TEXT NOT NULL,          -- what added it: a registered path, 'project', 'api' or 'text'
    path TEXT,                   -- absolute path of a file indexed in place (NULL for text)
    doc_hash TEXT NOT NULL,      -- hash of the whole document: unchanged -> nothing to do
    launchers TEXT NOT NULL,     -- JSON list of functions that launch a kernel in this file
    meta TEXT NOT NULL,          -- JSON
    text TEXT                    -- whole text, kept only for sources with no file (add_source)
);
CREATE TABLE IF NOT EXISTS chunks(
    id INTEGER PRIMARY KEY,      -- also the FTS rowid
    chunk_id TEXT UNIQUE NOT NULL,
    source TEXT NOT NULL,
    layer TEXT NOT NULL,
    title TEXT NOT NULL,
    kind TEXT NOT NULL,
    hash TEXT NOT NULL,
    text TEXT NOT NULL,
    launchers TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
CREATE TABLE IF NOT EXISTS roots(path TEXT PRIMARY KEY, layer TEXT NOT NULL, added_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS info(key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True)
class StoredChunk:
    chunk_id: str
    source: str
    layer: str
    title: str
    kind: str
    hash: str
    text: str

    def embed_text(self) -> str:
        return f"{self.title}\n{self.text}"


@dataclass(frozen=True)
class SourceRow:
    source: str
    layer: str
    root: str
    path: str | None
    doc_hash: str
    launchers: tuple[str, ...]
    meta: dict[str, Any]
    text: str | None


@dataclass(frozen=True)
class SyncCounts:
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0

    def __add__(self, o: "SyncCounts") -> "SyncCounts":
        return SyncCounts(self.added + o.added, self.changed + o.changed,
                          self.removed + o.removed, self.unchanged + o.unchanged)


class CatalogError(RuntimeError):
    pass


class Catalog:
    def __init__(self, db_path: Path):
        self.path = Path(db_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path))
        if not keyword.has_fts5(self.conn):
            raise CatalogError(f"SQLite {sqlite3.sqlite_version} at {sqlite3.__file__} lacks FTS5; "
                               "the knowledge base needs a Python whose sqlite3 has FTS5 (3.9+ builds do)")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.executescript(SCHEMA)
        self.conn.execute(keyword.FTS_SCHEMA)
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------ sources

    def source(self, source: str) -> SourceRow | None:
        row = self.conn.execute("SELECT source, layer, root, path, doc_hash, launchers, meta, text "
                                "FROM sources WHERE source = ?", (source,)).fetchone()
        if row is None:
            return None
        return SourceRow(row[0], row[1], row[2], row[3], row[4], tuple(json.loads(row[5])),
                         json.loads(row[6]), row[7])

    def sources(self, layer: str | None = None, root: str | None = None) -> list[SourceRow]:
        names = [r[0] for r in self.conn.execute(
            "SELECT source FROM sources WHERE (? IS NULL OR layer = ?) AND (? IS NULL OR root = ?) "
            "ORDER BY source", (layer, layer, root, root))]
        return [s for s in (self.source(n) for n in names) if s is not None]

    def put_document(self, source: str, layer: str, root: str, doc_hash: str, chunks: list[Chunk],
                     launchers: tuple[str, ...] = (), path: str | None = None,
                     meta: dict[str, Any] | None = None, text: str | None = None) -> SyncCounts:
        """Record one document and bring its chunks in line with `chunks`: rows whose hash is
        unchanged are left alone (so nothing re-embeds them); gone ones are deleted."""
        with self.conn:
            self.conn.execute(
                "INSERT INTO sources(source, layer, root, path, doc_hash, launchers, meta, text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(source) DO UPDATE SET layer=excluded.layer, "
                "root=excluded.root, path=excluded.path, doc_hash=excluded.doc_hash, "
                "launchers=excluded.launchers, meta=excluded.meta, text=excluded.text",
                (source, layer, root, path, doc_hash, json.dumps(list(launchers)),
                 json.dumps(meta or {}, sort_keys=True, default=str), text))
            return self._sync_chunks(source, chunks)

    def remove_document(self, source: str) -> int:
        with self.conn:
            n = self._sync_chunks(source, []).removed
            self.conn.execute("DELETE FROM sources WHERE source = ?", (source,))
        return n

    def _sync_chunks(self, source: str, chunks: list[Chunk]) -> SyncCounts:
        old = {cid: (rowid, h) for rowid, cid, h in self.conn.execute(
            "SELECT id, chunk_id, hash FROM chunks WHERE source = ?", (source,))}
        new = {c.chunk_id: c for c in chunks}
        gone = [old[cid][0] for cid in old if cid not in new]
        changed = [c for cid, c in new.items() if cid in old and old[cid][1] != c.hash]
        added = [c for cid, c in new.items() if cid not in old]
        stale = gone + [old[c.chunk_id][0] for c in changed]
        keyword.unindex_rows(self.conn, stale)
        self.conn.executemany("DELETE FROM chunks WHERE id = ?", [(r,) for r in stale])
        fts_rows = []
        for c in changed + added:
            cur = self.conn.execute(
                "INSERT INTO chunks(chunk_id, source, layer, title, kind, hash, text, launchers) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (c.chunk_id, c.source, c.layer, c.title, c.kind, c.hash, c.text, json.dumps(list(c.launchers))))
            fts_rows.append((cur.lastrowid, c.title, c.text, c.source))
        keyword.index_rows(self.conn, fts_rows)
        return SyncCounts(added=len(added), changed=len(changed), removed=len(gone),
                          unchanged=len(new) - len(added) - len(changed))

    # ------------------------------------------------------------ chunks

    def chunk_hashes(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT chunk_id, hash FROM chunks"))

    def chunk_count(self, source: str) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM chunks WHERE source = ?", (source,)).fetchone()[0]

    def chunk_layers(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT chunk_id, layer FROM chunks"))

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, StoredChunk]:
        out: dict[str, StoredChunk] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            for row in self.conn.execute(
                    "SELECT chunk_id, source, layer, title, kind, hash, text FROM chunks "
                    f"WHERE chunk_id IN ({','.join('?' * len(part))})", part):
                out[row[0]] = StoredChunk(*row)
        return out

    def titles(self, layer: str) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT title FROM chunks WHERE layer = ? ORDER BY title", (layer,))]

    def keyword_search(self, text: str, k: int, layers: tuple[str, ...] | None = None) -> list[tuple[str, float]]:
        return keyword.search(self.conn, text, k, layers)

    # ------------------------------------------------------------ roots and info

    def add_root(self, path: str, layer: str) -> None:
        with self.conn:
            self.conn.execute("INSERT INTO roots(path, layer, added_at) VALUES (?, ?, ?) "
                              "ON CONFLICT(path) DO UPDATE SET layer=excluded.layer", (path, layer, time.time()))

    def roots(self) -> list[tuple[str, str]]:
        return list(self.conn.execute("SELECT path, layer FROM roots ORDER BY path"))

    def set_info(self, key: str, value: str) -> None:
        with self.conn:
            self.conn.execute("INSERT INTO info(key, value) VALUES (?, ?) "
                              "ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))

    def info(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM info WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def counts(self) -> dict[str, dict[str, int]]:
        """{layer: {"chunks": n, "sources": m}} for every layer with content."""
        out: dict[str, dict[str, int]] = {}
        for layer, n in self.conn.execute("SELECT layer, COUNT(*) FROM chunks GROUP BY layer"):
            out.setdefault(layer, {"chunks": 0, "sources": 0})["chunks"] = n
        for layer, n in self.conn.execute("SELECT layer, COUNT(*) FROM sources GROUP BY layer"):
            out.setdefault(layer, {"chunks": 0, "sources": 0})["sources"] = n
        return out
