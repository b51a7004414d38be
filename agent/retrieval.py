"""Knowledge retrieval for the loop: a query from what the last evaluation showed, and snippets
for the prompt (de-duplicated, within a token budget, optionally with provenance hidden).

The loop calls `build_query(...)` then `retrieve_for_prompt(kb, query, ...)`; the search proposer
calls `alternatives(kb, op_name)`. `kb` is a knowledge.kb.KnowledgeBase or a NullRetriever.
"""
from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.types import Snippet
from knowledge.provenance import strip_provenance
from knowledge.query import close_api_titles, condense_error, error_query_text

log = logging.getLogger("aka.knowledge")

CHARS_PER_TOKEN = 4          # rough size estimate for budgeting; no tokenizer needed
MIN_TRUNCATED_TOKENS = 120   # a snippet cut shorter than this is more noise than help
TRUNCATION_MARK = "\n[... truncated]"


@dataclass(frozen=True)
class Query:
    text: str                               # what retrieval searches with
    op_name: str
    regime: str | None = None               # "memory" | "compute" | None
    error_kind: str | None = None           # "compile" | "runtime" | "correctness" | None
    prefer_layers: tuple[str, ...] = ()     # searched first (compile errors: "api")
    error: str = ""                         # the condensed error, for API name matching


class Retriever(Protocol):
    def search(self, text: str, k: int = 5, layers: tuple[str, ...] | None = None, mode: str = "hybrid") -> list: ...
    def reference_files(self, op_name: str) -> list: ...
    def api_titles(self) -> list[str]: ...
    def project_names(self) -> tuple[str, ...]: ...


class NullRetriever:
    """Retrieval switched off (knowledge.enabled=false, or no KB built yet): finds nothing."""

    def search(self, text: str, k: int = 5, layers: tuple[str, ...] | None = None, mode: str = "hybrid") -> list:
        return []

    def reference_files(self, op_name: str) -> list:
        return []

    def api_titles(self) -> list[str]:
        return []

    def project_names(self) -> tuple[str, ...]:
        return ()

    def add_source(self, text: str, layer: str = "reference", source: str = "", meta: dict | None = None,
                   embed: bool = True) -> None:
        return None


def open_retriever(kb_dir: Path, enabled: bool = True, vectors: bool = True):
    """The knowledge base at `kb_dir`, or a NullRetriever when retrieval is off or nothing is built."""
    if not enabled:
        return NullRetriever()
    from knowledge.kb import CATALOG_FILE, KnowledgeBase
    if not (Path(kb_dir) / CATALOG_FILE).is_file():
        log.warning("knowledge base: none at %s; run `aka kb build` (prompts get no snippets until then)", kb_dir)
        return NullRetriever()
    return KnowledgeBase(Path(kb_dir), vectors=vectors)


# ---------------------------------------------------------------- query

def _regime(shapes: list[dict[str, Any]]) -> str | None:
    weight: dict[str, float] = {}
    for s in shapes:
        if s.get("bound"):
            weight[s["bound"]] = weight.get(s["bound"], 0.0) + float(s.get("weight") or 1.0)
    return max(weight, key=weight.get) if weight else None


def _shape_text(s: dict[str, Any]) -> str:
    dims = " ".join(f"{k}={v}" for k, v in (s.get("dims") or {}).items())
    a = s.get("attainment")
    return f"{dims} {s.get('dtype', '')}" + (f" attainment {a:.2f}" if isinstance(a, (int, float)) else "")


def build_query(op_name: str, eval_result_json: dict | None, counters_diagnoses: list[str],
                error: str | None) -> Query:
    """Retrieval text from the operator, the bound regime, the worst shapes, the leading counter
    diagnoses and any error. The error goes first: it is the most specific signal."""
    result = eval_result_json or {}
    shapes = [s for s in result.get("shapes", []) if not s.get("holdout")]
    failed_stage = result.get("failed_stage")
    if error is None and result.get("verdict") == "rejected" and result.get("reasons"):
        error = "\n".join(str(r) for r in result["reasons"][:2])
    parts = []
    kind, condensed = None, ""
    if error:
        text, kind = error_query_text(error, failed_stage)
        condensed = condense_error(error)
        parts.append(text)
    regime = _regime(shapes)
    words = op_name.replace("_", " ")
    parts.append(f"{words} kernel ({op_name})" + (f", {regime}-bound" if regime else ""))
    if regime == "memory":
        parts.append("memory bandwidth: bytes moved, vectorized loads, loads in flight")
    elif regime == "compute":
        parts.append("compute: tensor cores, tl.dot tile sizes, num_warps, num_stages")
    scored = sorted((s for s in shapes if isinstance(s.get("attainment"), (int, float))),
                    key=lambda s: s["attainment"])
    if scored:
        parts.append("worst shapes: " + "; ".join(_shape_text(s) for s in scored[:2]))
    if counters_diagnoses:
        parts.append("counters: " + "; ".join(counters_diagnoses[:3]))
    return Query(text="\n".join(parts), op_name=op_name, regime=regime, error_kind=kind,
                 prefer_layers=("api",) if kind == "compile" else (), error=condensed)


# ---------------------------------------------------------------- snippets

def _norm_hash(text: str) -> str:
    return hashlib.sha256(re.sub(r"\s+", " ", text).strip().encode()).hexdigest()[:16]


def _tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


def _truncate(text: str, tokens: int) -> str:
    limit = tokens * CHARS_PER_TOKEN - len(TRUNCATION_MARK)
    cut = text[:limit]
    if "\n" in cut:
        cut = cut[:cut.rfind("\n")]
    return cut.rstrip() + TRUNCATION_MARK


def _candidates(kb, query: Query, k: int) -> list:
    text = query.text
    if query.error_kind == "compile" and query.error:
        # A compile error is about the code, not the operator's performance: search with the error
        # alone, led by the real API names closest to the `tl.` names it mentions (so a misspelled
        # or non-existent name still finds the right entry).
        names = close_api_titles(query.error, kb.api_titles())
        text = " ".join(names) + "\ncompile error: " + query.error
    hits: list = []
    for layer in query.prefer_layers:
        hits.extend(kb.search(text, k=max(1, (k + 1) // 2), layers=(layer,)))
    hits.extend(kb.search(text, k=2 * k))
    return hits


def retrieve_for_prompt(kb, query: Query, k: int, token_budget: int,
                        hide_provenance: bool) -> tuple[Snippet, ...]:
    """At most k snippets whose text fits `token_budget` (about 4 characters a token), best first,
    de-duplicated by chunk and by content; each carries its layer."""
    if k <= 0 or token_budget <= 0 or not query.text.strip():
        return ()
    names = kb.project_names() if hide_provenance else ()
    out: list[Snippet] = []
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    left = token_budget
    for hit in _candidates(kb, query, k):
        if len(out) == k or left < MIN_TRUNCATED_TOKENS // 2:
            break
        h = _norm_hash(hit.text)
        if hit.chunk_id in seen_ids or h in seen_text:
            continue
        seen_ids.add(hit.chunk_id)
        seen_text.add(h)
        text, title, source, chunk_id = hit.text, hit.title, hit.source, hit.chunk_id
        if hide_provenance:
            text, title = strip_provenance(text, names), strip_provenance(title, names)
            source, chunk_id = "", "kb:" + hashlib.sha256(hit.chunk_id.encode()).hexdigest()[:12]
        cost = _tokens(text)
        if cost > left:
            if left < MIN_TRUNCATED_TOKENS:
                continue            # a smaller snippet further down may still fit
            text = _truncate(text, left)
            cost = _tokens(text)
        left -= cost
        out.append(Snippet(text=text, layer=hit.layer, source=source, title=title, chunk_id=chunk_id,
                           score=float(hit.score)))
    return tuple(out)


def alternatives(kb, op_name: str, hide_provenance: bool = False) -> list[Snippet]:
    """Whole reference-layer files whose launcher is named `op_name`: the search proposer's
    alternative kernels for the same operator."""
    names = kb.project_names() if hide_provenance else ()
    out = []
    for f in kb.reference_files(op_name):
        text, source = f.text, f.source
        if hide_provenance:
            text, source = strip_provenance(text, names), ""
        chunk_id = f"{f.source}::<file>"
        if hide_provenance:
            chunk_id = "kb:" + hashlib.sha256(chunk_id.encode()).hexdigest()[:12]
        out.append(Snippet(text=text, layer="reference", source=source, title=op_name, chunk_id=chunk_id))
    return out


# ---------------------------------------------------------------- accepted kernels

def accepted_source_name(op_name: str, sha256: str) -> str:
    return f"accepted/{op_name}/{sha256[:12]}.py"


def add_accepted(kb, op_name: str, source: str, sha256: str, meta: dict | None = None, embed: bool = True):
    """Index one accepted kernel in the reference layer (the loop calls this on acceptance; a
    rebuild finds the same kernel again under the same name, so nothing is indexed twice)."""
    return kb.add_source(source, layer="reference", source=accepted_source_name(op_name, sha256),
                         meta={"op": op_name, "sha256": sha256, **(meta or {})}, embed=embed)


def index_accepted_kernels(kb, audit_db: Path, embed: bool = False) -> int:
    """Index every kernel the audit trail records as accepted (seeds that failed are skipped);
    embedding is left to the build that follows unless `embed`. Returns how many were read."""
    if not Path(audit_db).is_file():
        return 0
    from agent.audit import Audit
    with Audit(audit_db) as audit:
        ops = {r.run_id: r.body.get("op", "unknown") for r in audit.records(kind="run_start")}
        accepted = [r for r in audit.records(kind="accepted") if r.body.get("passed", True)]
        for r in accepted:
            sha = r.body["source_sha256"]
            add_accepted(kb, ops.get(r.run_id, "unknown"), audit.source(sha), sha,
                         {"run_id": r.run_id, "iteration": r.body.get("iteration"), "score": r.body.get("score")},
                         embed=embed)
    return len(accepted)
