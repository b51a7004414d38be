"""`aka kb build | add | query | stats` through typer's CliRunner on a real knowledge base."""
from typer.testing import CliRunner

from agent.cli_kb import app

runner = CliRunner(env={"COLUMNS": "200"})


def run(*args):
    result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    result.flat = " ".join(result.output.split())      # rich wraps long lines; compare word by word
    return result


def test_build_add_query_stats(tmp_path, private_home, kb_corpus):
    project = kb_corpus.make_project(tmp_path / "project")
    kb_dir = tmp_path / "kb"

    first = run("build", "--kb-dir", kb_dir, "--project-root", project, "--no-api", "--no-vectors")
    assert first.exit_code == 0, first.output
    assert "indexing project" in first.output                     # the progress bar's task
    assert "added" in first.flat and "vectors: off" in first.flat

    again = run("build", "--kb-dir", kb_dir, "--project-root", project, "--no-api", "--no-vectors")
    assert again.exit_code == 0 and " 0 added, 0 changed, 0 removed" in again.flat
    assert "loading embedding model" not in again.output          # vectors are off: nothing to load

    api_dir = kb_corpus.make_api_dir(tmp_path / "api-docs")
    added = run("add", api_dir, "--layer", "api", "--kb-dir", kb_dir, "--no-vectors")
    assert added.exit_code == 0 and "-> api" in added.flat and "3 added" in added.flat

    found = run("query", "element-wise minimum of two tensors", "--layer", "api", "-k", "2",
                "--kb-dir", kb_dir, "--no-vectors")
    assert found.exit_code == 0, found.output
    assert "1. [api] api-docs/triton_api.md::tl.minimum" in found.output

    notes_only = run("query", "masked rows NaN softmax", "-l", "notes", "-k", "1", "--kb-dir", kb_dir, "--no-vectors")
    assert "[notes] knowledge/notes/numerics-safe-softmax.md" in notes_only.output
    assert "[api]" not in notes_only.output

    stats = run("stats", "--kb-dir", kb_dir, "--no-vectors")
    assert stats.exit_code == 0
    assert "notes" in stats.output and "api" in stats.output and str(api_dir.resolve()) in stats.flat


def test_usage_errors(tmp_path, private_home):
    bad_layer = run("query", "x", "--layer", "docs", "--kb-dir", tmp_path / "kb", "--no-vectors")
    assert bad_layer.exit_code == 2 and "reference, notes, api" in bad_layer.flat
    missing = run("add", tmp_path / "nope", "--kb-dir", tmp_path / "kb", "--no-vectors")
    assert missing.exit_code == 2 and "does not exist" in missing.flat
    bad_mode = run("query", "x", "--mode", "fuzzy", "--kb-dir", tmp_path / "kb", "--no-vectors")
    assert bad_mode.exit_code == 2


def test_query_on_an_empty_knowledge_base_says_how_to_build(tmp_path, private_home):
    out = run("query", "anything", "--kb-dir", tmp_path / "kb", "--no-vectors")
    assert out.exit_code == 1 and "aka kb build" in out.flat


def test_query_without_a_knowledge_base_stops_before_opening_one(tmp_path, private_home):
    out = run("query", "anything", "--kb-dir", tmp_path / "kb")      # vectors on: the model would load first
    assert out.exit_code == 1 and f"no knowledge base at {tmp_path / 'kb'}" in out.flat
    assert not (tmp_path / "kb").exists()                              # nothing was opened or created
