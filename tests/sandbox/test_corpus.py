"""Every red-team and honest candidate file through `sandbox.evaluate`, one test per file.

Header lines (comments at the top of each file):
  # expect: reject | accept          # stage: one of lint|compile|correctness|dsl|timing (rejects);
                                     #   "correctness|lint" accepts either gate (a form the lint may learn)
  # op: rms_norm                     # needs: cpu (decidable under the interpreter) | gpu
  # why: <reason>                    # cause: <text the reason must contain; alternatives with |> (optional)
  # dims: T=1 H=128 | T=4 H=256      (optional visible shapes)   # timeout_s: 40 (optional)
needs: cpu files run under the Triton interpreter on any machine; needs: gpu files are gpu-marked.
Honest files must all be accepted: zero false rejections.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from benchmarks.hardware import load_hardware
from benchmarks.registry import load_operator
from benchmarks.spec import Shape
from sandbox.evaluation import EvalRequest, evaluate
from sandbox.verdict import STAGES

HERE = Path(__file__).resolve().parent
FILES = sorted((HERE / "redteam").glob("*.py")) + sorted((HERE / "honest").glob("*.py"))
_HEADER = re.compile(r"^#\s*([a-z_]+):\s*(.*?)\s*$")


def parse_header(text: str) -> dict[str, str]:
    """The `# key: value` lines before the first line of code (continuation comment lines are skipped)."""
    head: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        m = _HEADER.match(line)
        if m and m.group(1) not in head:
            head[m.group(1)] = m.group(2)
    return head


def parse_dims(text: str) -> list[dict[str, int]]:
    """"T=1 H=128 | T=4 H=256" -> [{"T": 1, "H": 128}, {"T": 4, "H": 256}]."""
    return [{k: int(v) for k, v in (kv.split("=") for kv in part.split())} for part in text.split("|")]


def visible_shapes(spec, head: dict[str, str], gpu: bool) -> tuple[Shape, ...]:
    """Two small shapes: from the file's `dims`, else the operator's smallest hot shapes (the interpreter
    scales them down itself), else its hold-out generator when shapes.yaml is not there yet."""
    dtype = "bf16"
    if "dims" in head:
        dims = parse_dims(head["dims"])
    elif spec.shapes:
        hot = sorted(spec.select("hot") or spec.shapes, key=lambda s: _numel(s.dim))
        dims, dtype = [s.dim for s in hot[:2]], hot[0].dtype
    else:
        dims = sorted(spec.holdout_dims(random.Random(0)), key=_numel)[:2]
    return tuple(Shape.make(f"s{i}", d, dtype=dtype, weight=1.0) for i, d in enumerate(dims))


def _numel(dims: dict[str, int]) -> int:
    n = 1
    for v in dims.values():
        n *= v
    return n


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


@pytest.mark.parametrize("path", [_case(p) for p in FILES])
def test_corpus_file(path: Path):
    source = path.read_text()
    head = parse_header(source)
    gpu = head["needs"] == "gpu"
    spec = load_operator(head["op"])
    req = EvalRequest(op=head["op"], source=source, shapes=visible_shapes(spec, head, gpu),
                      hardware=load_hardware("h200"), trials=2, timeout_s=float(head.get("timeout_s", 300)),
                      interpreter=not gpu, timing=gpu)
    res = evaluate(req)
    summary = f"{path.name}: {res.verdict} at {res.failed_stage}: {res.reasons}"
    if head["expect"] == "accept":
        assert res.accepted, summary
        assert all(s.error is None for s in res.shapes), summary
        return
    assert not res.accepted, summary
    assert res.failed_stage in head["stage"].split("|"), summary
    assert res.reasons and all(r.strip() for r in res.reasons), summary
    if "cause" in head:
        text = " ".join(res.reasons).lower()
        assert any(c.strip().lower() in text for c in head["cause"].split("|")), \
            f"{summary}\n(expected the reason to mention {head['cause']!r})"
