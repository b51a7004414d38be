"""The audit trail: one SQLite file (WAL), append-only, hash-chained, sources stored by content.

Every record (a run starting, an evaluation, an iteration, an accepted kernel, a dropout, a run
ending) is one row of `records`. Each row carries the hash of its predecessor, and its own hash is
sha256 over the canonical JSON of {seq, run_id, kind, ts, prev_hash, body}; `verify()` walks the
chain and names the first record that was edited, deleted, inserted or moved. Sources live in
`blobs`, keyed by the sha256 of their text, so a kernel seen twice is stored once and an edited
source no longer matches its key.

Append-only is enforced three ways: this module issues no UPDATE or DELETE; SQLite triggers RAISE on
UPDATE or DELETE of `records` and `blobs`; and the chain exposes whatever a person does after
dropping the triggers. Removing records from the end of the chain leaves no broken link, so after
each append the head (last seq and hash) is also written to `<db>.head`; verify checks that the
record it names is still there and unchanged. (Keep a copy of that file elsewhere for a stronger
guarantee: someone who rewrites the whole chain and the head file together is caught only by a copy.)

Views (`runs`, `iterations`, `evaluations`, `candidates`, `dropout_events`, `llm_usage`) give the
per-kind tables for people reading the file with the sqlite3 shell.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

GENESIS = "0" * 64
KINDS = ("run_start", "resume", "evaluation", "iteration", "accepted", "dropout", "run_end", "note")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq       INTEGER PRIMARY KEY,   -- 1, 2, 3, ... without gaps
    run_id    TEXT NOT NULL,
    kind      TEXT NOT NULL,
    ts        TEXT NOT NULL,         -- UTC, ISO 8601
    body      TEXT NOT NULL,         -- canonical JSON (sorted keys, no spaces)
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id, kind);
CREATE TABLE IF NOT EXISTS blobs (
    sha256  TEXT PRIMARY KEY,
    size    INTEGER NOT NULL,
    content TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'audit records are append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'audit records are append-only: DELETE refused'); END;
CREATE TRIGGER IF NOT EXISTS blobs_no_update BEFORE UPDATE ON blobs
BEGIN SELECT RAISE(ABORT, 'audit blobs are append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS blobs_no_delete BEFORE DELETE ON blobs
BEGIN SELECT RAISE(ABORT, 'audit blobs are append-only: DELETE refused'); END;
CREATE VIEW IF NOT EXISTS runs AS
    SELECT run_id, ts AS started, body->>'$.op' AS op, body->>'$.shape_set' AS shape_set,
           body->>'$.proposer' AS proposer, body->>'$.model' AS model FROM records WHERE kind = 'run_start';
CREATE VIEW IF NOT EXISTS iterations AS
    SELECT run_id, seq, body->>'$.record.iteration' AS iteration, body->>'$.record.verdict' AS verdict,
           body->>'$.record.failed_stage' AS failed_stage, body->>'$.record.score' AS score,
           body->>'$.record.accepted' AS accepted, body->>'$.record.changed' AS changed,
           body->>'$.record.lesson' AS lesson FROM records WHERE kind = 'iteration';
CREATE VIEW IF NOT EXISTS evaluations AS
    SELECT run_id, seq, body->>'$.iteration' AS iteration, body->>'$.role' AS role,
           body->>'$.source_sha256' AS source_sha256, body->>'$.result.verdict' AS verdict,
           body->>'$.result.failed_stage' AS failed_stage, body->>'$.gpu_s' AS gpu_s,
           body->'$.result.environment' AS environment FROM records WHERE kind = 'evaluation';
CREATE VIEW IF NOT EXISTS candidates AS
    SELECT r.run_id, r.body->>'$.record.iteration' AS iteration, b.sha256, b.size, b.content
    FROM records r JOIN blobs b ON b.sha256 = r.body->>'$.source_sha256' WHERE r.kind = 'iteration';
CREATE VIEW IF NOT EXISTS dropout_events AS
    SELECT run_id, seq, body->>'$.iteration' AS iteration, body->'$.masked' AS masked,
           body->>'$.rng_seed' AS rng_seed, body->>'$.p' AS p FROM records WHERE kind = 'dropout';
CREATE VIEW IF NOT EXISTS llm_usage AS
    SELECT run_id, body->>'$.record.iteration' AS iteration, body->>'$.usage.prompt_tokens' AS prompt_tokens,
           body->>'$.usage.completion_tokens' AS completion_tokens, body->>'$.usage.usd' AS usd,
           body->>'$.usage.calls' AS calls FROM records WHERE kind = 'iteration';
"""


class AuditError(RuntimeError):
    pass


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN/inf become strings (JSON has no spelling for them), tuples become lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_hash(seq: int, run_id: str, kind: str, ts: str, prev_hash: str, body: Any) -> str:
    return sha256_text(canonical_json({"seq": seq, "run_id": run_id, "kind": kind, "ts": ts,
                                       "prev_hash": prev_hash, "body": body}))


@dataclass(frozen=True)
class Record:
    seq: int
    run_id: str
    kind: str
    ts: str
    body: dict[str, Any]
    hash: str


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    records: int
    blobs: int
    first_bad_seq: int | None = None
    problem: str = ""
    tail_checked: bool = True       # False: no head file, so records deleted from the end cannot be seen

    def __str__(self) -> str:
        if self.ok:
            return f"ok: {self.records} records and {self.blobs} sources verified; the hash chain is intact"
        return f"TAMPERED: {self.problem}"

    def tail_warning(self, head_path: Path) -> str:
        return (f"warning: no head file {head_path}: records deleted from the end of the chain cannot be "
                f"detected (every append rewrites it; keep a copy elsewhere; --strict fails in this case)")


class Audit:
    """One audit database. Cheap to open; every append is its own transaction."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.head_path = self.path.with_name(self.path.name + ".head")
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so reading the head and
        # appending after it is one atomic step even with two aka processes on one file.
        self.db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")   # an accepted kernel must survive a power cut too
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Audit":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- writing -------------------------------------------------------------------------
    def put_source(self, text: str) -> str:
        """Store a source by content; returns its sha256. Storing the same text twice is a no-op."""
        sha = sha256_text(text)
        self.db.execute("INSERT OR IGNORE INTO blobs(sha256, size, content) VALUES (?, ?, ?)",
                        (sha, len(text.encode("utf-8")), text))
        return sha

    def append(self, run_id: str, kind: str, body: dict[str, Any]) -> Record:
        return self.append_many([(run_id, kind, body)])[-1]

    def append_many(self, items: Iterable[tuple[str, str, dict[str, Any]]]) -> list[Record]:
        """Append records in one transaction: all of them land, or none."""
        items = list(items)
        for _, kind, _ in items:
            if kind not in KINDS:
                raise AuditError(f"unknown record kind {kind!r}; kinds: {', '.join(KINDS)}")
        out: list[Record] = []
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute("SELECT seq, hash FROM records ORDER BY seq DESC LIMIT 1").fetchone()
            seq, prev = (row[0], row[1]) if row else (0, GENESIS)
            for run_id, kind, body in items:
                seq += 1
                clean = _clean(body)
                ts = datetime.now(timezone.utc).isoformat(timespec="microseconds")
                h = record_hash(seq, run_id, kind, ts, prev, clean)
                self.db.execute("INSERT INTO records(seq, run_id, kind, ts, body, prev_hash, hash) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?)", (seq, run_id, kind, ts, canonical_json(clean), prev, h))
                out.append(Record(seq, run_id, kind, ts, clean, h))
                prev = h
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._write_head(out[-1].seq, out[-1].hash)
        return out

    def _write_head(self, seq: int, h: str) -> None:
        tmp = self.head_path.with_name(f"{self.head_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"seq": seq, "hash": h}))
        os.replace(tmp, self.head_path)

    # ---- reading -------------------------------------------------------------------------
    def records(self, run_id: str | None = None, kind: str | None = None) -> list[Record]:
        sql, args = "SELECT seq, run_id, kind, ts, body, hash FROM records", []
        where = []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self.db.execute(sql + " ORDER BY seq", args).fetchall()
        return [Record(s, r, k, t, json.loads(b), h) for s, r, k, t, b, h in rows]

    def source(self, sha: str) -> str:
        row = self.db.execute("SELECT content FROM blobs WHERE sha256 = ?", (sha,)).fetchone()
        if row is None:
            raise AuditError(f"no source with sha256 {sha} in {self.path}")
        return row[0]

    def run_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT run_id FROM records WHERE kind = 'run_start' ORDER BY seq").fetchall()]

    def resolve_run(self, prefix: str) -> str:
        """A run id from a unique prefix of it (or the word `last`)."""
        ids = self.run_ids()
        if prefix == "last" and ids:
            return ids[-1]
        hits = [i for i in ids if i == prefix] or [i for i in ids if i.startswith(prefix)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise AuditError(f"no run {prefix!r} in {self.path}; `aka audit list` shows the runs")
        raise AuditError(f"run prefix {prefix!r} is ambiguous: {', '.join(hits[:5])}; give more characters")

    # ---- verification --------------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Walk the chain; name the first record that was edited, deleted, inserted or reordered."""
        prev, expected, count, referenced = GENESIS, 1, 0, set()
        rows = self.db.execute("SELECT seq, run_id, kind, ts, body, prev_hash, hash FROM records ORDER BY seq")
        for seq, run_id, kind, ts, body_text, prev_hash, h in rows:
            count += 1
            where = f"record #{seq} ({kind}, run {run_id})"
            if seq != expected:
                return VerifyReport(False, count, 0, expected,
                                    f"record #{expected} is missing: the chain jumps from #{expected - 1} to #{seq} "
                                    f"(records were deleted)")
            try:
                body = json.loads(body_text)
            except ValueError:
                return VerifyReport(False, count, 0, seq, f"{where}: body is not valid JSON (edited)")
            if canonical_json(body) != body_text:
                return VerifyReport(False, count, 0, seq, f"{where}: body is not in canonical form (edited)")
            if prev_hash != prev:
                return VerifyReport(False, count, 0, seq,
                                    f"{where}: does not link to record #{seq - 1} (records were deleted, inserted "
                                    f"or reordered before it)")
            if record_hash(seq, run_id, kind, ts, prev_hash, body) != h:
                return VerifyReport(False, count, 0, seq, f"{where}: content does not match its hash (edited)")
            referenced.update(_source_refs(body))
            prev, expected = h, seq + 1
        numbering = self._check_iteration_numbers()
        if numbering is not None:
            return VerifyReport(False, count, 0, numbering[0], numbering[1])
        head = self._read_head()
        if head is not None:
            row = self.db.execute("SELECT hash FROM records WHERE seq = ?", (head["seq"],)).fetchone()
            if row is None:
                return VerifyReport(False, count, 0, head["seq"],
                                    f"record #{head['seq']} is missing: {self.head_path.name} names it as the chain's "
                                    f"head (records were deleted from the end)")
            if row[0] != head["hash"]:
                return VerifyReport(False, count, 0, head["seq"],
                                    f"record #{head['seq']}: its hash differs from the one {self.head_path.name} "
                                    f"recorded (the chain was rewritten)")
        blobs = 0
        for sha, content in self.db.execute("SELECT sha256, content FROM blobs"):
            blobs += 1
            if sha256_text(content) != sha:
                return VerifyReport(False, count, blobs, None, f"source {sha[:12]}: content does not match its "
                                                               f"sha256 (edited)")
            referenced.discard(sha)
        if referenced:
            missing = sorted(referenced)[0]
            return VerifyReport(False, count, blobs, None, f"source {missing[:12]} is referenced by a record but "
                                                           f"missing from blobs (deleted)")
        return VerifyReport(True, count, blobs, tail_checked=head is not None or count == 0)

    def _check_iteration_numbers(self) -> tuple[int, str] | None:
        """Per run, iteration records are numbered 0, 1, 2, ... each once (a second writer of one run,
        or a replayed record, shows as a repeat or a gap): (seq, problem) of the first that is not."""
        expected: dict[str, int] = {}
        rows = self.db.execute("SELECT seq, run_id, body->>'$.record.iteration' FROM records "
                               "WHERE kind = 'iteration' ORDER BY seq")
        for seq, run_id, it in rows:
            want = expected.get(run_id, 0)
            if it is None or int(it) != want:
                what = "repeats an iteration number" if it is not None and int(it) < want else "skips iterations"
                return seq, (f"record #{seq} (iteration, run {run_id}) is iteration {it}, expected {want}: the "
                             f"run {what} (two writers at once, or records removed or replayed)")
            expected[run_id] = want + 1
        return None

    def _read_head(self) -> dict | None:
        try:
            return json.loads(self.head_path.read_text())
        except (OSError, ValueError):
            return None


def _source_refs(body: Any) -> set[str]:
    """Every sha256 a record points at: values of keys ending in `_sha256`."""
    out: set[str] = set()
    if isinstance(body, dict):
        for k, v in body.items():
            if k.endswith("_sha256") and isinstance(v, str) and len(v) == 64:
                out.add(v)
            else:
                out |= _source_refs(v)
    elif isinstance(body, list):
        for v in body:
            out |= _source_refs(v)
    return out


def new_run_id(op: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{op}-{stamp}-{os.urandom(2).hex()}"


def atomic_write(path: Path, text: str) -> None:
    """Write-then-rename with fsync: after a kill at any point the file is either old or new, never partial."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
