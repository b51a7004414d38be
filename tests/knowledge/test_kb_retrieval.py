"""agent.retrieval: queries from an evaluation, snippets for the prompt, alternatives, NullRetriever."""
import logging

from agent.retrieval import (CHARS_PER_TOKEN, NullRetriever, Query, alternatives, build_query, open_retriever,
                             retrieve_for_prompt)
from agent.types import Snippet
from knowledge.provenance import leaks
from sandbox.verdict import EvalResult, ShapeResult

COMPILE_ERROR = """triton.compiler.errors.CompilationError: at 6:20:
    tl.store(out_ptr + offs, tl.minimium(a, b), mask=m)
                             ^
AttributeError("module 'triton.language' has no attribute 'minimium'")"""


def eval_json(**kw):
    shapes = [
        ShapeResult("t1", {"T": 1, "H": 4096}, "bf16", 0.5, attainment=0.21, bound="memory"),
        ShapeResult("t64", {"T": 64, "H": 4096}, "bf16", 0.3, attainment=0.55, bound="memory"),
        ShapeResult("t4k", {"T": 4096, "H": 4096}, "bf16", 0.2, attainment=0.8, bound="compute"),
        ShapeResult("hidden", {"T": 4097, "H": 4099}, "bf16", 0.0, attainment=0.01, bound="memory", holdout=True),
    ]
    return EvalResult(op="rms_norm", verdict="accepted", shapes=shapes, **kw).to_json()


def test_build_query_from_a_measured_result():
    q = build_query("rms_norm", eval_json(), ["DRAM throughput 31% of peak", "few warps active", "x", "y"], None)
    assert q.regime == "memory" and q.error_kind is None and q.prefer_layers == ()
    assert q.text.startswith("rms norm kernel (rms_norm), memory-bound")
    assert "worst shapes: T=1 H=4096 bf16 attainment 0.21; T=64 H=4096" in q.text
    assert "4097" not in q.text                                  # hold-out shapes never leak into queries
    assert "DRAM throughput 31% of peak; few warps active; x" in q.text and "; y" not in q.text


def test_build_query_puts_a_compile_error_first_and_prefers_api():
    q = build_query("rms_norm", None, [], COMPILE_ERROR)
    assert q.error_kind == "compile" and q.prefer_layers == ("api",)
    assert q.text.startswith("compile error: ") and "tl.minimium(a, b)" in q.text
    rejected = EvalResult(op="rms_norm", verdict="rejected", failed_stage="correctness",
                          reasons=["max_rel_err 0.5 > 0.02 at shape t1"]).to_json()
    q = build_query("rms_norm", rejected, [], None)
    assert q.error_kind == "correctness" and "max_rel_err 0.5" in q.text


def test_snippets_carry_layer_and_stay_within_budget(vector_kb):
    kb, _, _ = vector_kb
    q = Query(text="softmax row fully masked NaN, min of two tensors, int32 overflow in offsets", op_name="x")
    snippets = retrieve_for_prompt(kb, q, k=4, token_budget=400, hide_provenance=False)
    assert 1 <= len(snippets) <= 4 and all(isinstance(s, Snippet) for s in snippets)
    assert all(s.layer in ("notes", "api", "reference") and s.source and s.chunk_id for s in snippets)
    assert sum(len(s.text) for s in snippets) // CHARS_PER_TOKEN <= 400
    assert len({s.chunk_id for s in snippets}) == len(snippets)
    big = retrieve_for_prompt(kb, q, k=4, token_budget=100_000, hide_provenance=False)
    assert sum(len(s.text) for s in big) > sum(len(s.text) for s in snippets)
    assert retrieve_for_prompt(kb, q, k=0, token_budget=400, hide_provenance=False) == ()


def test_duplicate_texts_are_returned_once(vector_kb, tmp_path, private_home, kb_corpus):
    from knowledge.kb import KnowledgeBase
    kb = KnowledgeBase(tmp_path / "kb", vectors=False)
    text = "# Split-K\nsplit the K dimension across programs and combine partial sums\n"
    kb.add_source(text, layer="notes", source="a/split.md")
    kb.add_source(text, layer="notes", source="b/split.md")
    snippets = retrieve_for_prompt(kb, Query(text="split K partial sums", op_name="gemm"), 5, 1000, False)
    assert len(snippets) == 1
    kb.close()


def test_compile_error_brings_api_entries_first(vector_kb):
    kb, _, _ = vector_kb
    q = build_query("toy_add", None, [], COMPILE_ERROR)
    snippets = retrieve_for_prompt(kb, q, k=4, token_budget=2000, hide_provenance=False)
    assert snippets[0].layer == "api" and "tl.minimum" in snippets[0].text
    assert any(s.layer == "notes" for s in snippets)


def test_hidden_provenance_strips_paths_and_project_names(vector_kb):
    kb, _, _ = vector_kb
    q = Query(text="toy add kernel launcher triton.cdiv BLOCK", op_name="toy_add")
    shown = retrieve_for_prompt(kb, q, k=5, token_budget=5000, hide_provenance=False)
    hidden = retrieve_for_prompt(kb, q, k=5, token_budget=5000, hide_provenance=True)
    assert any("/" in s.source for s in shown)
    assert len(hidden) == len(shown)
    for s in hidden:
        assert s.source == "" and s.chunk_id.startswith("kb:") and "/" not in s.chunk_id
        assert leaks(s.text) == [] and leaks(s.title) == []
    alts = alternatives(kb, "toy_add", hide_provenance=True)
    assert len(alts) == 2 and all(a.source == "" and leaks(a.text) == [] for a in alts)


def test_alternatives_are_whole_reference_files(vector_kb, kb_corpus):
    kb, _, _ = vector_kb
    alts = alternatives(kb, "toy_add")
    assert {a.source for a in alts} == {"benchmarks/operators/toy_add/seed.py", "accepted/toy_add/abc123.py"}
    assert all(a.layer == "reference" and "def toy_add(x, y):" in a.text for a in alts)
    assert kb_corpus.toy_seed in {a.text for a in alts}


def test_null_retriever_and_open_retriever(tmp_path, caplog):
    null = NullRetriever()
    q = Query(text="anything", op_name="x")
    assert retrieve_for_prompt(null, q, 5, 1000, True) == () and alternatives(null, "x") == []
    assert isinstance(open_retriever(tmp_path, enabled=False), NullRetriever)
    with caplog.at_level(logging.WARNING, logger="aka.knowledge"):
        assert isinstance(open_retriever(tmp_path / "none"), NullRetriever)
    assert "aka kb build" in caplog.text


def test_open_retriever_returns_a_built_knowledge_base(vector_kb):
    from knowledge.kb import KnowledgeBase
    _, _, base = vector_kb
    kb = open_retriever(base / "kb", vectors=False)
    assert isinstance(kb, KnowledgeBase) and kb.stats()["layers"]["notes"]["chunks"] == 4
    kb.close()


def test_accepted_kernels_from_the_audit_trail_join_the_reference_layer(tmp_path, private_home, kb_corpus):
    from agent.audit import Audit
    from agent.retrieval import accepted_source_name, index_accepted_kernels
    from knowledge.kb import KnowledgeBase

    better = kb_corpus.toy_seed.replace('"BLOCK": 1024', '"BLOCK": 4096')
    failed_seed = kb_corpus.toy_seed.replace("x + y", "x - y")
    with Audit(tmp_path / "audit.db") as audit:
        sha, bad = audit.put_source(better), audit.put_source(failed_seed)
        audit.append("run1", "run_start", {"op": "toy_add"})
        audit.append("run1", "accepted", {"iteration": 0, "source_sha256": bad, "seed": True, "passed": False})
        audit.append("run1", "accepted", {"iteration": 4, "source_sha256": sha, "score": 0.8, "seed": False})
    kb = KnowledgeBase(tmp_path / "kb", vectors=False)
    assert index_accepted_kernels(kb, tmp_path / "audit.db") == 1
    assert index_accepted_kernels(kb, tmp_path / "missing.db") == 0
    alts = alternatives(kb, "toy_add")
    assert [a.source for a in alts] == [accepted_source_name("toy_add", sha)] and alts[0].text == better
    meta = kb.catalog.source(accepted_source_name("toy_add", sha)).meta
    assert meta == {"op": "toy_add", "sha256": sha, "run_id": "run1", "iteration": 4, "score": 0.8}
    # Reading the trail again indexes nothing new.
    before = kb.catalog.chunk_hashes()
    index_accepted_kernels(kb, tmp_path / "audit.db")
    assert kb.catalog.chunk_hashes() == before
    kb.close()
