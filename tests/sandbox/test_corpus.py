"""Every red-team and honest candidate file through `sandbox.evaluate`, one test per file.

The header format is in sandbox/corpus.py. needs: cpu files run under the Triton interpreter on any machine;
needs: gpu files are gpu-marked. Honest files must all be accepted: zero false rejections.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from sandbox.corpus import corpus_files, parse_header, visible_shapes
from sandbox_requests import make_request
from sandbox.evaluation import EvalRequest, evaluate
from sandbox.prestart import WorkerPool
from sandbox.verdict import STAGES

HERE = Path(__file__).resolve().parent
FILES = corpus_files(HERE)


def _case(path: Path):
    head = parse_header(path.read_text())
    marks = [pytest.mark.gpu] if head.get("needs") == "gpu" else [pytest.mark.interpreter]
    return pytest.param(path, id=f"{path.parent.name}/{path.stem}", marks=marks)


def test_corpus_is_there_and_well_formed():
    assert any(p.name.startswith("rt_") for p in FILES) and any(p.parent.name == "honest" for p in FILES)
    for p in FILES:
        head = parse_header(p.read_text())
        assert head.get("expect") in ("reject", "accept"), p.name
        assert head.get("op") and head.get("needs") in ("cpu", "gpu") and head.get("why"), p.name
        if head["expect"] == "reject":
            stages = head.get("stage", "").split("|")
            assert all(s in STAGES for s in stages), f"{p.name}: stage {head.get('stage')!r} not in {STAGES}"
        assert (p.parent.name == "honest") == (head["expect"] == "accept"), p.name


@pytest.fixture(scope="module")
def pool():
    """Pre-started workers, as a run's Sandbox uses them: each file still gets a fresh process that has run
    no candidate code, while the next one's `import torch, triton` overlaps this file's evaluation
    (about 2 s of ~6 s per file on 2 cores). Each request keeps its own settings (timeout_s per file)."""
    with WorkerPool(prestart=True) as p:
        yield p


@pytest.mark.parametrize("path", [_case(p) for p in FILES])
def test_corpus_file(path: Path, pool: WorkerPool):
    source = path.read_text()
    head = parse_header(source)
    gpu = head["needs"] == "gpu"
    spec = load_operator(head["op"])
    req = make_request(head["op"], source, visible_shapes(spec, head), trials=2,
                       timeout_s=float(head.get("timeout_s", 300)), interpreter=not gpu, timing=gpu)
    res = evaluate(req, pool=pool)
    summary = f"{path.name}: {res.verdict} at {res.failed_stage}: {res.reasons}"
    if head["expect"] == "accept":
        assert res.accepted, summary
        assert all(s.error is None for s in res.shapes), summary
        # the compile gate built its kernels for Hopper (sm_90 offline without a GPU): registers known, no spills
        kernels = (res.compile_info or {}).get("kernels") or []
        assert kernels and all(k.get("registers") and k.get("spills_bytes") == 0 for k in kernels), \
            f"{path.name}: {[(k.get('name'), k.get('registers'), k.get('spills_bytes')) for k in kernels]}"
        return
    assert not res.accepted, summary
    assert res.failed_stage in head["stage"].split("|"), summary
    assert res.reasons and all(r.strip() for r in res.reasons), summary
    if "cause" in head:
        text = " ".join(res.reasons).lower()
        assert any(c.strip().lower() in text for c in head["cause"].split("|")), \
            f"{summary}\n(expected the reason to mention {head['cause']!r})"
