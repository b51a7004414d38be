"""Shared fixtures: a tiny project tree and one knowledge base with real vectors per session.

Embedding is the slow part (sentence-transformers imports in 6-7 s), so the corpus is a few of
our notes, two small kernel files and one api document, built once and shared read-only.
Tests that mutate a knowledge base build their own, keyword-only unless they test vectors.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTES = REPO / "knowledge" / "notes"
SAMPLE_NOTES = ("pitfall-min-vs-minimum.md", "numerics-safe-softmax.md", "gemm-split-k.md",
                "pitfall-int32-offsets.md")

TOY_SEED = '''"""Toy operator for knowledge-base tests: out = x + y."""
import torch
import triton
import triton.language as tl

CONFIGS = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def _toy_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x + y, mask=mask)


def toy_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _toy_add_kernel[(triton.cdiv(n, CONFIGS["BLOCK"]),)](x, y, out, n, BLOCK=CONFIGS["BLOCK"])
    return out
'''

TOY_SOFTMAX = '''"""Row softmax, safe against overflow: subtract the row max before exp."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_max(x):
    return tl.max(x, axis=0)


@triton.jit
def _toy_softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - _row_max(x))
    tl.store(y_ptr + row * n + offs, e / tl.sum(e, axis=0), mask=offs < n)


def toy_softmax(x):
    y = torch.empty_like(x)
    _toy_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def unrelated_helper(a, b):
    return a * b + 1
'''

API_DOC = """# tl.minimum

tl.minimum(x, y, propagate_nan) computes the element-wise minimum of two tensors.

# tl.load

tl.load(pointer, mask=None, other=None, cache_modifier, eviction_policy) loads a block from memory;
masked lanes take the value of other.

# tl.make_tensor_descriptor

tl.make_tensor_descriptor(base, shape, strides, block_shape) builds a TMA descriptor; the kernel
then needs triton.set_allocator for its global scratch memory.
"""


def make_project(root: Path) -> Path:
    """A project tree shaped like ours: notes, one operator seed, one honest candidate."""
    (root / "knowledge" / "notes").mkdir(parents=True)
    for name in SAMPLE_NOTES:
        shutil.copy(NOTES / name, root / "knowledge" / "notes" / name)
    seed = root / "benchmarks" / "operators" / "toy_add" / "seed.py"
    seed.parent.mkdir(parents=True)
    seed.write_text(TOY_SEED)
    honest = root / "tests" / "sandbox" / "honest" / "toy_softmax_rows.py"
    honest.parent.mkdir(parents=True)
    honest.write_text(TOY_SOFTMAX)
    return root


def make_api_dir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "triton_api.md").write_text(API_DOC)
    return root


@pytest.fixture(scope="session")
def private_home(tmp_path_factory):
    """chromadb and onnxruntime may write under $HOME: point it at a temporary folder."""
    old = os.environ.get("HOME")
    home = tmp_path_factory.mktemp("home")
    os.environ["HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("HOME", None)
    else:
        os.environ["HOME"] = old


@pytest.fixture(scope="session")
def vector_kb(tmp_path_factory, private_home):
    """One knowledge base with real chromadb vectors, shared read-only across the session."""
    from knowledge.kb import KnowledgeBase

    base = tmp_path_factory.mktemp("vector-kb")
    project = make_project(base / "project")
    api_dir = make_api_dir(base / "api-docs")
    kb = KnowledgeBase(base / "kb")
    report = kb.build(project, include_api=False)
    kb.add(api_dir, "api")
    kb.add_source(TOY_SEED.replace("x + y", "y + x").replace('"BLOCK": 1024', '"BLOCK": 2048'),
                  layer="reference", source="accepted/toy_add/abc123.py", meta={"op": "toy_add", "score": 0.9})
    yield kb, report, base
    kb.close()


@pytest.fixture(scope="session")
def kb_corpus():
    """The corpus builders and texts, for tests that build their own knowledge base."""
    from types import SimpleNamespace
    return SimpleNamespace(make_project=make_project, make_api_dir=make_api_dir, toy_seed=TOY_SEED,
                           toy_softmax=TOY_SOFTMAX, api_doc=API_DOC, sample_notes=SAMPLE_NOTES, repo=REPO)
