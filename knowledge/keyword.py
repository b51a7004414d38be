"""Keyword retrieval: an SQLite FTS5 index ranked by bm25.

The index tokenizes with `porter unicode61`: underscores and dots separate tokens, so
`num_warps` is found by "num warps" and `tl.minimum` by "minimum"; Porter stemming lets
"stages" match "stage". Queries are turned into an OR of quoted terms (never raw FTS syntax,
so an error message full of quotes and parentheses cannot break the query).
"""
from __future__ import annotations

import re
import sqlite3

FTS_TABLE = "chunks_fts"
FTS_SCHEMA = (f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} "
              "USING fts5(title, text, source, tokenize='porter unicode61')")

# bm25 column weights (title, text, source): a hit in a heading or function name says more
# than one in a paragraph; the path says least.
COLUMN_WEIGHTS = (4.0, 1.0, 0.5)

# Words that carry no signal in our queries: English glue plus traceback boilerplate.
STOPWORDS = frozenset("""
a an and are as at be been but by can could do does did for from has have how i if in into is it
its of on or should so than that the their then there these this to was were what when where which
while who why will with would you your we our not no yes use using used via per get got make
file line lines error traceback most recent call last self none true false return def py
""".split())

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+")


def has_fts5(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp._fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE IF EXISTS temp._fts5_probe")
        return True
    except sqlite3.OperationalError:
        return False


def query_terms(text: str, limit: int = 48) -> list[str]:
    """Distinct lower-case terms of `text` worth matching, in order of first appearance.

    Splits identifiers (`num_warps` -> num, warps; `tl.dot` -> tl, dot) the way the index does.
    Numbers are kept only when they have two or more digits (a "16" in "K >= 16" matters; a
    stray "1" does not).
    """
    seen: dict[str, None] = {}
    for tok in _TOKEN.findall(text):
        t = tok.lower()
        if t in STOPWORDS or (t.isdigit() and len(t) < 2) or (len(t) < 2 and not t.isdigit()):
            continue
        seen.setdefault(t, None)
        if len(seen) >= limit:
            break
    return list(seen)


def match_expression(text: str) -> str | None:
    terms = query_terms(text)
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms)


def search(conn: sqlite3.Connection, text: str, k: int,
           layers: tuple[str, ...] | None = None) -> list[tuple[str, float]]:
    """(chunk_id, score) best first; score is -bm25, so larger is better."""
    expr = match_expression(text)
    if expr is None:
        return []
    sql = (f"SELECT c.chunk_id, bm25({FTS_TABLE}, ?, ?, ?) AS rank FROM {FTS_TABLE} "
           f"JOIN chunks c ON c.id = {FTS_TABLE}.rowid WHERE {FTS_TABLE} MATCH ?")
    args: list = [*COLUMN_WEIGHTS, expr]
    if layers:
        sql += f" AND c.layer IN ({','.join('?' * len(layers))})"
        args.extend(layers)
    sql += " ORDER BY rank, c.chunk_id LIMIT ?"
    args.append(int(k))
    return [(cid, -float(rank)) for cid, rank in conn.execute(sql, args)]


def index_rows(conn: sqlite3.Connection, rows: list[tuple[int, str, str, str]]) -> None:
    """Insert (rowid, title, text, source) into the FTS table."""
    conn.executemany(f"INSERT INTO {FTS_TABLE}(rowid, title, text, source) VALUES (?, ?, ?, ?)", rows)


def unindex_rows(conn: sqlite3.Connection, rowids: list[int]) -> None:
    conn.executemany(f"DELETE FROM {FTS_TABLE} WHERE rowid = ?", [(r,) for r in rowids])
