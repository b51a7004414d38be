"""`aka optimize --from-reference`: what a proposer is told when there is no kernel yet.

Without a seed the first kernel is written from the contract alone, so the prompt carries what the
seed would otherwise have shown by example: the PyTorch reference's source, what the call returns
per shape, the candidate format (benchmarks/operators/README.md) and the lint policy's summary
(sandbox/POLICY.md). The two documents are read at prompt time, so the prompt says what the gates
enforce today, not a copy that drifts from them.

The reference's source is `reference` plus the module-level names it uses (constants, helpers,
the import lines that bring names in), in file order. The functions that draw inputs and hidden
shapes (`make_inputs`, `holdout_dims`, ...) are never shown, even when the reference calls them: a
proposer that saw how the hidden shapes are drawn could special-case them.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from agent.config import PROJECT_ROOT

# Functions of an operator file a proposer never sees (see the module docstring).
WITHHELD = frozenset({"make_inputs", "holdout_dims", "interpreter_dims", "occurrences", "work"})
CANDIDATE_FORMAT_DOC = PROJECT_ROOT / "benchmarks" / "operators" / "README.md"
CANDIDATE_FORMAT_START = "## seed.py (the candidate format)"
LINT_POLICY_DOC = PROJECT_ROOT / "sandbox" / "POLICY.md"
LINT_POLICY_START = "The principle:"


def reference_source(operator_text: str, entry: str = "reference") -> str:
    """The source of `entry` and of every module-level definition it needs, in file order."""
    tree = ast.parse(operator_text)
    lines = operator_text.splitlines()
    defined: dict[str, ast.stmt] = {}
    for node in tree.body:
        for name in _names_bound(node):
            defined.setdefault(name, node)
    if not isinstance(defined.get(entry), ast.FunctionDef):
        raise ValueError(f"the operator file defines no module-level `def {entry}(...)`; the contract "
                         f"(benchmarks/operators/README.md) requires one")
    keep: set[int] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        node = defined.get(name)
        if node is None or name in WITHHELD or id(node) in keep:
            continue
        keep.add(id(node))
        todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    return "\n\n".join(_segment(lines, node) for node in tree.body if id(node) in keep) + "\n"


def _names_bound(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", "") != "__future__":
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return []


def _segment(lines: list[str], node: ast.stmt) -> str:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(lines[first - 1:node.end_lineno])


def output_rows(spec: Any, shapes) -> tuple[dict[str, Any], ...]:
    """What the call returns on each visible shape, for every operator form: its outputs (one, or the tuple
    of OUTPUTS, or none) and the arguments it writes in place (MUTATES)."""
    return tuple({"id": s.id, "mutates": list(spec.mutates), "tuple": spec.output_names is not None,
                  "outputs": [{"name": n, "shape": list(shape), "dtype": d} for n, shape, d in spec.outputs(s.dim, s.dtype)]}
                 for s in shapes)


def doc_excerpt(path: Path, start: str) -> str:
    """The lines of a markdown file from the one that starts with `start` (a heading is dropped) to
    the next `## ` heading; "" when the file or the line is missing (an installed copy without the
    documents: the system message still states the format)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return ""
    begin = next((i for i, line in enumerate(lines) if line.startswith(start)), None)
    if begin is None:
        return ""
    body = lines[begin + 1:] if lines[begin].startswith("#") else lines[begin:]
    end = next((i for i, line in enumerate(body) if line.startswith("## ")), len(body))
    return "\n".join(body[:end]).strip()


def writing_documents() -> dict[str, str]:
    """The candidate format and the lint policy's summary, as the prompt shows them."""
    return {"candidate_format": doc_excerpt(CANDIDATE_FORMAT_DOC, CANDIDATE_FORMAT_START),
            "lint_summary": doc_excerpt(LINT_POLICY_DOC, LINT_POLICY_START)}


def needs_a_model(proposer: str) -> str:
    """Why --from-reference cannot run with a proposer that only rewrites a kernel, and what to pass."""
    return (f"--from-reference needs a model: the {proposer} proposer only rewrites an existing kernel (the search "
            f"retunes its CONFIGS and constexprs), so with no seed it has nothing to start from. Pass one with "
            f"--model PROVIDER/MODEL (e.g. --model anthropic/claude-sonnet-4-6, or a local OpenAI-compatible "
            f"server: --model openai/NAME --api-base http://127.0.0.1:8000/v1), or drop --from-reference to "
            f"start from the operator's seed.py")
