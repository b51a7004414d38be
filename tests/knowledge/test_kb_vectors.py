"""The knowledge base with a real chromadb directory and real MiniLM embeddings, and its fallback."""
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge.kb import CATALOG_FILE, VECTOR_DIR, KnowledgeBase

REPO = Path(__file__).resolve().parents[2]


def test_build_embeds_every_chunk_into_a_real_chroma_dir(vector_kb):
    kb, report, base = vector_kb
    assert report.first_build and report.vector_status == "ready"
    assert report.embedded == report.counts.added > 0
    assert (base / "kb" / VECTOR_DIR).is_dir() and (base / "kb" / CATALOG_FILE).is_file()
    store = kb.vector_store()
    assert store.hashes() == kb.catalog.chunk_hashes()      # every chunk, with its current hash


def test_layers_and_sources_are_recorded(vector_kb):
    kb, _, _ = vector_kb
    layers = kb.stats()["layers"]
    assert layers["notes"]["sources"] == 4 and layers["api"]["chunks"] == 3
    assert layers["reference"]["sources"] == 3              # seed, honest candidate, accepted kernel
    src = kb.catalog.source("benchmarks/operators/toy_add/seed.py")
    assert src.layer == "reference" and src.launchers == ("toy_add",) and src.path.endswith("seed.py")


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_each_mode_finds_the_right_note(vector_kb, mode):
    kb, _, _ = vector_kb
    hits = kb.search("softmax of a row where every position is masked gives NaN", k=3, mode=mode)
    assert hits and hits[0].source == "knowledge/notes/numerics-safe-softmax.md"
    assert hits[0].layer == "notes"


def test_hybrid_fuses_both_rankers(vector_kb):
    kb, _, _ = vector_kb
    hits = kb.search("tl.minimum elementwise minimum of two tensors", k=4, mode="hybrid")
    assert any(h.keyword_rank is not None and h.vector_rank is not None for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    only_api = kb.search("tl.minimum elementwise minimum of two tensors", k=4, layers=("api",))
    assert only_api and {h.layer for h in only_api} == {"api"}


def test_vector_search_finds_a_paraphrase(vector_kb):
    kb, _, _ = vector_kb
    hits = kb.search("partial sums from several programs combined afterwards", k=3, mode="vector")
    assert "knowledge/notes/gemm-split-k.md" in {h.source for h in hits}
    assert all(h.vector_rank is not None and h.keyword_rank is None for h in hits)


def test_reference_files_are_whole_files_whose_launcher_matches(vector_kb, kb_corpus):
    kb, _, _ = vector_kb
    files = {f.source: f for f in kb.reference_files("toy_add")}
    assert set(files) == {"benchmarks/operators/toy_add/seed.py", "accepted/toy_add/abc123.py"}
    assert files["benchmarks/operators/toy_add/seed.py"].text == kb_corpus.toy_seed
    assert files["accepted/toy_add/abc123.py"].meta == {"op": "toy_add", "score": 0.9}
    assert kb.reference_files("toy_softmax")[0].source == "tests/sandbox/honest/toy_softmax_rows.py"
    assert kb.reference_files("no_such_op") == []


def test_incremental_rebuild_reembeds_only_what_changed(tmp_path, private_home, kb_corpus):
    project = kb_corpus.make_project(tmp_path / "project")
    kb = KnowledgeBase(tmp_path / "kb")
    first = kb.build(project, include_api=False)
    assert first.embedded == first.counts.added > 0

    again = kb.build(project, include_api=False)
    assert (again.counts.added, again.counts.changed, again.counts.removed, again.embedded) == (0, 0, 0, 0)
    assert not again.first_build

    note = project / "knowledge" / "notes" / "gemm-split-k.md"
    note.write_text(note.read_text() + "\nOne more line about split-K.\n")
    (project / "knowledge" / "notes" / "pitfall-int32-offsets.md").unlink()
    edited = kb.build(project, include_api=False)
    assert (edited.counts.changed, edited.counts.removed, edited.embedded, edited.vectors_deleted) == (1, 1, 1, 2)
    hashes = kb.vector_store().hashes()
    assert hashes == kb.catalog.chunk_hashes()
    assert not any(cid.startswith("knowledge/notes/pitfall-int32-offsets.md") for cid in hashes)

    unchanged = kb.add_source(kb_corpus.toy_seed, source="accepted/toy_add/1.py")
    assert unchanged.added > 0
    assert kb.add_source(kb_corpus.toy_seed, source="accepted/toy_add/1.py").added == 0
    assert kb.vector_store().count() == len(kb.catalog.chunk_hashes())
    kb.close()


def test_added_directory_is_indexed_in_place(tmp_path, private_home, kb_corpus):
    checkout = tmp_path / "vllm"
    (checkout / "ops").mkdir(parents=True)
    (checkout / "ops" / "toy.py").write_text(kb_corpus.toy_seed)
    (checkout / "ops" / "not_a_kernel.py").write_text("def f():\n    return 1\n")
    (checkout / "README.md").write_text("# readme\nnot a kernel\n")
    kb = KnowledgeBase(tmp_path / "kb", vectors=False)
    report = kb.add(checkout, "reference")
    assert report.counts.added == len({"<module>", "_toy_add_kernel"})
    src = kb.catalog.source("vllm/ops/toy.py")
    assert src.path == str((checkout / "ops" / "toy.py").resolve()) and src.text is None   # not copied
    assert kb.catalog.source("vllm/ops/not_a_kernel.py") is None and kb.catalog.source("vllm/README.md") is None
    assert kb.catalog.roots() == [(str(checkout.resolve()), "reference")]
    assert "vllm" in kb.project_names()
    assert not any(p.name == "toy.py" for p in (tmp_path / "kb").rglob("*"))
    # A later build re-scans the added root: a deleted file goes away.
    (checkout / "ops" / "toy.py").unlink()
    kb.build(kb_corpus.make_project(tmp_path / "p"), include_api=False)
    assert kb.catalog.source("vllm/ops/toy.py") is None
    with pytest.raises(ValueError, match="reference, notes, api"):
        kb.add(checkout, "docs")
    kb.close()


def test_fallback_without_vector_backend_warns_once_and_searches_keywords(vector_kb, caplog):
    _, _, base = vector_kb
    kb = KnowledgeBase(base / "kb", vectors=False)           # as if chromadb could not be imported
    with caplog.at_level(logging.WARNING, logger="aka.knowledge"):
        hits = kb.search("softmax of a row where every position is masked gives NaN", k=3)
        kb.search("tl.minimum", k=3, mode="vector")
    warnings = [r for r in caplog.records if "vector search unavailable" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()
    assert hits and hits[0].source == "knowledge/notes/numerics-safe-softmax.md"
    assert all(h.vector_rank is None for h in hits)
    assert kb.stats()["vectors"].startswith("off (")
    report = kb.build(base / "project", include_api=False)  # indexing still works
    assert report.vector_status.startswith("off") and report.embedded == 0
    kb.close()


def test_fallback_when_the_embedding_model_is_missing(vector_kb, tmp_path, caplog):
    _, _, base = vector_kb
    kb = KnowledgeBase(base / "kb", model_path=tmp_path / "no-model-here")
    with caplog.at_level(logging.WARNING, logger="aka.knowledge"):
        hits = kb.search("int32 overflow in offsets", k=2)
    assert hits and "embedding model not found" in caplog.text
    kb.close()


def test_importing_retrieval_does_not_import_the_vector_stack():
    code = ("import sys, knowledge.retrieve, knowledge.kb, knowledge.api_extract, agent.retrieval, agent.cli_kb\n"
            "print(sorted(m for m in ('chromadb', 'sentence_transformers', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
