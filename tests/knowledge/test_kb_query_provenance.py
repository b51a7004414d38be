"""Query handling (condensed errors, error kinds, API names) and hidden provenance."""
from knowledge.provenance import NAME_MARK, leaks, strip_provenance
from knowledge.query import (api_names_in, close_api_titles, condense_error, error_kind, error_query_text)

TRACEBACK = '''Traceback (most recent call last):
  File "/home/u/aka/sandbox/worker.py", line 88, in run
    fn(**inputs)
  File "/tmp/cand.py", line 41, in rms_norm
    _k[grid](x, y)
triton.compiler.errors.CompilationError: at 6:20:
    b = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.min(a, b), mask=m)
                             ^
ValueError('Did you forget to add @triton.jit ?')
'''


def test_condense_keeps_the_message_and_offending_line_not_the_frames():
    text = condense_error(TRACEBACK)
    assert "tl.store(out_ptr + offs, tl.min(a, b), mask=m)" in text
    assert "Did you forget to add @triton.jit" in text
    assert "CompilationError" in text and "triton.compiler.errors" not in text and "6:20" not in text
    assert "worker.py" not in text and "line 88" not in text
    assert len(condense_error("x" * 5000 + "\nValueError: end", limit=100)) <= 100


def test_error_kinds():
    assert error_kind(TRACEBACK) == "compile"
    assert error_kind("anything", failed_stage="lint") == "compile"
    assert error_kind("out of resource: shared memory, Required: 1, Hardware limit: 0") == "runtime"
    assert error_kind(None, failed_stage="correctness") == "correctness"
    assert error_kind(None) is None
    text, kind = error_query_text(TRACEBACK)
    assert kind == "compile" and text.startswith("compile error: ")


def test_api_names_and_close_titles_for_misspellings():
    err = "AttributeError(\"module 'triton.language' has no attribute 'bf16'\") at tl.minimium(a, b)"
    assert api_names_in(err) == ["bf16", "minimium"]
    titles = ["tl.minimum", "tl.maximum", "tl.bfloat16", "tl.load", "tl dtypes"]
    close = close_api_titles(err, titles)
    assert "tl.minimum" in close and "tl.bfloat16" in close and "tl.load" not in close
    assert close_api_titles("tl.load(p)", titles) == ["tl.load"]


def test_strip_provenance_removes_paths_urls_and_project_names():
    text = ("# Adapted from https://github.com/vllm-project/vllm/blob/main/x.py\n"
            "from vllm.model_executor.layers import fused_moe  # see sglang/srt/layers/moe.py\n"
            "path = '/home/user/checkouts/Liger-Kernel/src/liger_kernel/ops/rms_norm.py'\n"
            "aka stores results under AKA_HOME; FlashInfer and TensorRT-LLM differ.\n"
            "off = pid * BLOCK_M / 2 + M/BLOCK_M/2  # tl.dot(a, b) stays\n")
    out = strip_provenance(text, extra_names=("mycheckout",))
    for gone in ("vllm", "sglang", "Liger", "liger_kernel", "github.com", "/home/user", "FlashInfer", "TensorRT-LLM",
                 "rms_norm.py", "aka stores"):
        assert gone.lower() not in out.lower(), (gone, out)
    assert "M/BLOCK_M/2" in out and "tl.dot(a, b)" in out and NAME_MARK in out
    assert leaks(out) == []
    assert leaks(text)
    assert strip_provenance("see mycheckout/kernels", extra_names=("mycheckout",)).startswith("see [")


def test_names_need_word_boundaries():
    assert strip_provenance("Sakana and vllmx and kaka") == "Sakana and vllmx and kaka"
