"""The api layer comes from the installed packages: triton.language and Inductor's templates."""
import importlib.util

import pytest

from knowledge.api_extract import (api_documents, inductor_template_files, torch_dir, triton_language_chunks,
                                   triton_runtime_chunks)


@pytest.fixture(scope="module")
def tl_entries():
    return {c.title: c for c in triton_language_chunks()}


def test_every_public_triton_language_function_has_an_entry(tl_entries):
    import inspect

    import triton.language as tl
    public_callables = [n for n in tl.__all__
                        if callable(getattr(tl, n)) and not isinstance(getattr(tl, n), tl.dtype)
                        and not inspect.ismodule(getattr(tl, n))]
    missing = [n for n in public_callables if f"tl.{n}" not in tl_entries]
    assert len(public_callables) > 80 and missing == []


def test_entries_carry_signature_and_docstring_without_internal_params(tl_entries):
    load = tl_entries["tl.load"].text
    assert load.startswith("tl.load(pointer, mask=None, other=None")
    assert "_semantic" not in load and "_generator" not in load
    assert "eviction_policy" in load and "cache_modifier" in load
    assert ":code:" not in load
    assert "reduction" in tl_entries["tl.min"].text.lower() or "minimum of all elements" in tl_entries["tl.min"].text
    assert "element-wise minimum" in tl_entries["tl.minimum"].text
    assert all(c.layer == "api" and c.source == "triton.language" for c in tl_entries.values())


def test_dtype_listing_names_the_real_names(tl_entries):
    dtypes = tl_entries["tl dtypes"].text
    assert "tl.bfloat16" in dtypes and "tl.float8e4nv" in dtypes and "tl.bf16" not in dtypes


def test_runtime_entry_points():
    titles = {c.title for c in triton_runtime_chunks()}
    assert {"triton.jit", "triton.Config", "triton.cdiv", "triton.set_allocator"} <= titles


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_inductor_templates_found_without_importing_torch_and_only_triton_ones():
    root = torch_dir()
    files = inductor_template_files(root)
    names = {p.name for p in files}
    assert "triton_mm.py.jinja" in names and "triton_helpers.py" in names
    assert not any("cutedsl" in n for n in names)      # CuTe DSL templates are not Triton
    groups = api_documents()
    assert "torch/_inductor/kernel/templates/triton_mm.py.jinja" in groups
    helpers = {c.title for c in groups["torch/_inductor/runtime/triton_helpers.py"]}
    assert "welford_reduce" in helpers
