"""Chunking: kernel + launcher together, other Python by def, markdown by heading, stable ids."""
from pathlib import Path

import pytest

from knowledge.ingest import (MAX_CHUNK_CHARS, chunk_document, chunk_markdown, chunk_python, chunk_text,
                              content_hash, launchers_in)
from knowledge.layers import accepts_file, check_layer, project_files, walk_files


def by_title(chunks):
    return {c.title: c for c in chunks}


def test_kernel_chunk_holds_its_launcher(kb_corpus):
    chunks = by_title(chunk_python(kb_corpus.toy_seed, "ops/toy_add/seed.py", "reference"))
    kernel = chunks["_toy_add_kernel"]
    assert kernel.kind == "kernel"
    assert "@triton.jit" in kernel.text and "def toy_add(x, y):" in kernel.text
    assert kernel.launchers == ("toy_add",)
    # The launcher is inside the kernel chunk, not a chunk of its own.
    assert "toy_add" not in chunks
    assert chunks["<module>"].kind == "module" and "CONFIGS" in chunks["<module>"].text
    assert kernel.chunk_id == "ops/toy_add/seed.py::_toy_add_kernel"


def test_helpers_and_plain_defs_are_chunked_by_def(kb_corpus):
    chunks = by_title(chunk_python(kb_corpus.toy_softmax, "honest/softmax.py", "reference"))
    assert chunks["_row_max"].kind == "kernel" and chunks["_row_max"].launchers == ()
    assert chunks["_toy_softmax_kernel"].launchers == ("toy_softmax",)
    assert chunks["unrelated_helper"].kind == "def"
    assert "def toy_softmax(x):" not in chunks["unrelated_helper"].text
    assert launchers_in(list(chunks.values())) == ("toy_softmax",)


def test_launch_through_module_attribute_and_autotune_decorator():
    src = (
        "import triton\nimport triton.language as tl\nimport kernels\n\n"
        "@triton.autotune(configs=[triton.Config({'B': 64})], key=['n'])\n@triton.jit\n"
        "def _k(x, n, B: tl.constexpr):\n    pass\n\n\n"
        "def run(x):\n    kernels.inner._k[(1,)](x, x.numel())\n"
    )
    chunks = by_title(chunk_python(src, "a.py", "reference"))
    assert chunks["_k"].launchers == ("run",)
    assert "@triton.autotune" in chunks["_k"].text


def test_unparseable_python_falls_back_to_text():
    chunks = chunk_python("def broken(:\n    pass\n", "bad.py", "reference")
    assert len(chunks) == 1 and chunks[0].kind == "text" and "broken" in chunks[0].text


def test_markdown_by_heading_with_path_titles_and_fences():
    md = ("# Top\nintro line\n\n## First\nbody one\n```python\n# not a heading\nx = 1\n```\n"
          "### Deep\ndeep body\n## Second\nbody two\n")
    chunks = chunk_markdown(md, "notes/x.md", "notes")
    titles = [c.title for c in chunks]
    assert titles == ["Top", "Top > First", "Top > First > Deep", "Top > Second"]
    first = by_title(chunks)["Top > First"]
    assert "# not a heading" in first.text and "deep body" not in first.text


def test_markdown_heading_without_body_makes_no_chunk():
    chunks = chunk_markdown("# Title\n## Only heading\n## Real\ntext\n", "n.md", "notes")
    assert [c.title for c in chunks] == ["Title > Real"]


def test_text_windows_and_large_chunks_split():
    text = "\n\n".join(f"block {i} " + "x" * 900 for i in range(6))
    parts = chunk_text(text, "t/template.py.jinja", "api", kind="template")
    assert len(parts) >= 2 and all(len(p.text) <= 2600 for p in parts)
    assert parts[0].title == f"template.py.jinja [1/{len(parts)}]"
    big = "def f():\n" + "\n".join(f"    x{i} = {i}" for i in range(3000))
    chunks = chunk_document(big, "big.py", "reference")
    assert len(chunks) > 1 and all(len(c.text) <= MAX_CHUNK_CHARS for c in chunks)
    assert chunks[0].title == f"f [part 1/{len(chunks)}]"


def test_duplicate_titles_get_numbered():
    chunks = chunk_document("# A\none\n# A\ntwo\n", "dup.md", "notes")
    assert [c.title for c in chunks] == ["A", "A #2"]
    assert len({c.chunk_id for c in chunks}) == 2


def test_hash_tracks_content_layer_and_title():
    a = chunk_document("# A\none\n", "n.md", "notes")[0]
    assert a.hash == chunk_document("# A\none\n", "n.md", "notes")[0].hash
    assert a.hash != chunk_document("# A\none!\n", "n.md", "notes")[0].hash
    assert a.hash != chunk_document("# A\none\n", "n.md", "api")[0].hash
    assert len(content_hash("x")) == 20


def test_unknown_layer_is_refused_with_the_options():
    with pytest.raises(ValueError, match="reference, notes, api"):
        check_layer("docs")


def test_layer_file_rules(tmp_path, kb_corpus):
    kernel = tmp_path / "k.py"
    kernel.write_text(kb_corpus.toy_seed)
    plain = tmp_path / "plain.py"
    plain.write_text("def f():\n    return 1\n")
    assert accepts_file("reference", kernel, kernel.read_text())
    assert not accepts_file("reference", plain, plain.read_text())
    assert accepts_file("api", plain, plain.read_text())
    assert not accepts_file("notes", plain)
    assert accepts_file("notes", tmp_path / "a.md")


def test_walk_skips_vcs_caches_and_hidden_dirs(tmp_path):
    for rel in ("a.md", "sub/b.md", ".git/c.md", "__pycache__/d.md", ".hidden/e.md", "node_modules/f.md"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("# x\ny\n")
    found = [p.relative_to(tmp_path).as_posix() for p in walk_files(tmp_path, "notes")]
    assert found == ["a.md", "sub/b.md"]


def test_project_files_finds_notes_seeds_and_honest_candidates(tmp_path, kb_corpus):
    root = kb_corpus.make_project(tmp_path / "proj")
    found = {(layer, p.relative_to(root).as_posix()) for layer, p in project_files(root)}
    assert ("reference", "benchmarks/operators/toy_add/seed.py") in found
    assert ("reference", "tests/sandbox/honest/toy_softmax_rows.py") in found
    assert sum(1 for layer, _ in found if layer == "notes") == len(kb_corpus.sample_notes)


def test_our_notes_are_many_short_and_single_headed():
    notes = sorted((Path(__file__).resolve().parents[2] / "knowledge" / "notes").glob("*.md"))
    assert len(notes) >= 30
    for p in notes:
        text = p.read_text()
        chunks = chunk_document(text, p.name, "notes")
        assert len(chunks) == 1, f"{p.name} should be one chunk (one # heading), got {len(chunks)}"
        assert len(text.split()) <= 320, f"{p.name} has {len(text.split())} words; keep notes short"
