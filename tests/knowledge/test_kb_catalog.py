"""The SQLite catalogue and its FTS5 keyword index: real files, incremental by hash."""
import sqlite3

from knowledge import keyword
from knowledge.catalog import Catalog
from knowledge.indexer import FileDoc, index_document, index_files
from knowledge.ingest import chunk_document


def test_query_terms_split_identifiers_and_drop_noise():
    terms = keyword.query_terms('File "/x/y.py", line 3, in f\n  tl.minimum(a, b) num_warps K >= 16 a 1')
    assert "minimum" in terms and "num" in terms and "warps" in terms and "16" in terms
    assert "file" not in terms and "line" not in terms and "a" not in terms and "1" not in terms


def test_match_expression_survives_fts_syntax_in_errors():
    expr = keyword.match_expression('AttributeError("module \'triton.language\' has no attribute \'bf16\'") AND (x* NEAR')
    assert expr is not None and '"bf16"' in expr
    conn = sqlite3.connect(":memory:")
    conn.execute(keyword.FTS_SCHEMA)
    conn.execute(f"INSERT INTO {keyword.FTS_TABLE}(rowid, title, text, source) VALUES (1, 't', 'bf16 values', 's')")
    rows = conn.execute(f"SELECT rowid FROM {keyword.FTS_TABLE} WHERE {keyword.FTS_TABLE} MATCH ?", (expr,)).fetchall()
    assert rows == [(1,)]
    assert keyword.match_expression("a the of") is None


def test_bm25_ranks_the_matching_note_first(tmp_path, kb_corpus):
    cat = Catalog(tmp_path / "c.sqlite")
    for name in kb_corpus.sample_notes:
        text = (kb_corpus.repo / "knowledge" / "notes" / name).read_text()
        index_document(cat, text, f"notes/{name}", "notes", "project")
    hits = cat.keyword_search("tl.min(a, b) Did you forget to add @triton.jit", 3)
    assert hits[0][0].startswith("notes/pitfall-min-vs-minimum.md::")
    assert hits[0][1] >= hits[-1][1]
    hits = cat.keyword_search("illegal memory access row * stride overflow int64", 2)
    assert hits[0][0].startswith("notes/pitfall-int32-offsets.md::")


def test_layer_filter(tmp_path, kb_corpus):
    cat = Catalog(tmp_path / "c.sqlite")
    index_document(cat, kb_corpus.api_doc, "api/triton_api.md", "api", "api")
    index_document(cat, "# minimum of two tensors\nuse tl.minimum\n", "notes/n.md", "notes", "project")
    assert {c.split("/")[0] for c, _ in cat.keyword_search("minimum", 10)} == {"api", "notes"}
    assert {c.split("/")[0] for c, _ in cat.keyword_search("minimum", 10, ("notes",))} == {"notes"}


def test_incremental_by_hash(tmp_path):
    cat = Catalog(tmp_path / "c.sqlite")
    doc = "# A\nalpha text\n# B\nbeta text\n# C\ngamma text\n"
    first = index_document(cat, doc, "n.md", "notes", "project")
    assert (first.added, first.changed, first.removed) == (3, 0, 0)
    rowids = dict(cat.conn.execute("SELECT chunk_id, id FROM chunks"))

    again = index_document(cat, doc, "n.md", "notes", "project")
    assert (again.added, again.changed, again.removed, again.unchanged) == (0, 0, 0, 3)

    edited = index_document(cat, "# A\nalpha text\n# B\nbeta EDITED\n# D\ndelta\n", "n.md", "notes", "project")
    assert (edited.added, edited.changed, edited.removed, edited.unchanged) == (1, 1, 1, 1)
    after = dict(cat.conn.execute("SELECT chunk_id, id FROM chunks"))
    assert after["n.md::A"] == rowids["n.md::A"]          # unchanged row untouched
    assert "n.md::C" not in after
    assert cat.keyword_search("gamma", 5) == []             # removed from FTS too
    assert cat.keyword_search("edited", 5)[0][0] == "n.md::B"
    assert cat.keyword_search("beta", 5)[0][0] == "n.md::B"  # no stale FTS row left behind
    n_fts = cat.conn.execute(f"SELECT COUNT(*) FROM {keyword.FTS_TABLE}").fetchone()[0]
    assert n_fts == cat.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 3


def test_index_files_removes_documents_that_disappeared(tmp_path):
    cat = Catalog(tmp_path / "c.sqlite")
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("# a\naaa\n")
    b.write_text("# b\nbbb\n")
    docs = [FileDoc("notes", a, "a.md"), FileDoc("notes", b, "b.md")]
    assert index_files(cat, docs, "root1").added == 2
    b.unlink()
    counts = index_files(cat, docs[:1], "root1")
    assert counts.removed == 1 and cat.source("b.md") is None and cat.keyword_search("bbb", 5) == []
    # Another root's documents are not touched by root1's pruning.
    index_document(cat, "# c\nccc\n", "c.md", "notes", "root2")
    index_files(cat, [], "root1")
    assert cat.source("c.md") is not None and cat.source("a.md") is None


def test_source_rows_keep_launchers_meta_and_text(tmp_path, kb_corpus):
    cat = Catalog(tmp_path / "c.sqlite")
    index_document(cat, kb_corpus.toy_seed, "acc/toy.py", "reference", "text", meta={"op": "toy_add"}, keep_text=True)
    row = cat.source("acc/toy.py")
    assert row.launchers == ("toy_add",) and row.meta == {"op": "toy_add"} and row.text == kb_corpus.toy_seed
    assert cat.counts() == {"reference": {"chunks": len(chunk_document(kb_corpus.toy_seed, "acc/toy.py", "reference")),
                                          "sources": 1}}
    cat.close()
    reopened = Catalog(tmp_path / "c.sqlite")           # persisted on disk
    assert reopened.source("acc/toy.py").launchers == ("toy_add",)
