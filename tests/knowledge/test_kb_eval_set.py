"""The labelled retrieval set is well formed and every label names a chunk that exists."""
from pathlib import Path

import pytest

from knowledge.retrieval_eval import load_queries, matches, missing_labels, recall
from knowledge.api_extract import api_documents
from knowledge.ingest import chunk_document

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def queries():
    return load_queries()


def test_set_size_and_kinds(queries):
    assert len(queries) >= 40
    kinds = {q.kind for q in queries}
    assert kinds == {"error", "bottleneck", "api"}
    assert all(q.relevant and q.text for q in queries)
    assert min(sum(1 for q in queries if q.kind == k) for k in kinds) >= 10


def test_error_entries_go_through_the_loop_s_condensing(queries):
    by_id = {q.id: q for q in queries}
    assert by_id["err-dot-k16"].text.startswith("compile error: ")
    assert "triton.compiler.errors" not in by_id["err-dot-k16"].text


def test_every_label_names_an_existing_chunk(queries):
    chunk_ids = [c.chunk_id for chunks in api_documents().values() for c in chunks]
    for p in sorted((REPO / "knowledge" / "notes").glob("*.md")):
        chunk_ids += [c.chunk_id for c in chunk_document(p.read_text(), f"knowledge/notes/{p.name}", "notes")]
    for p in sorted((REPO / "benchmarks" / "operators").glob("*/seed.py")):
        rel = p.relative_to(REPO).as_posix()
        chunk_ids += [c.chunk_id for c in chunk_document(p.read_text(), rel, "reference")]
    assert missing_labels(queries, chunk_ids) == []


def test_label_matching_and_recall():
    assert matches("notes/a.md", "notes/a.md::Title")
    assert not matches("notes/a.md", "notes/a.mdx::Title")
    assert matches("triton.language::tl.dot", "triton.language::tl.dot")
    assert not matches("triton.language::tl.dot", "triton.language::tl.dot_scaled")
    assert recall(("a", "b::x"), ["a::1", "c::2"]) == 0.5
    assert recall(("a",), []) == 0.0
