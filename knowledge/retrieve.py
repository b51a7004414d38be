"""Hybrid retrieval: bm25 over FTS5 and cosine over embeddings, fused by reciprocal rank.

Reciprocal-rank fusion (score = sum over rankers of 1 / (RRF_K + rank)) needs no score
calibration between bm25 and cosine similarity, which live on unrelated scales. Each ranker
contributes its top CANDIDATES; a chunk found by both rises above one found by either alone.

Importing this module imports neither chromadb nor sentence_transformers: the vector side is
whatever object the caller passes (knowledge.store.VectorStore, opened on first use).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from knowledge.catalog import Catalog

MODES = ("hybrid", "keyword", "vector")
RRF_K = 60          # the constant from the original RRF paper; damps the head of each list
CANDIDATES = 50     # depth each ranker contributes to the fusion
# Weighted RRF (keyword, vector). bm25 is the stronger ranker on our corpus: error messages and
# API names match literally, and the embedding model reads only the first ~256 word pieces of a
# chunk. The weight was chosen on the even-numbered half of knowledge/retrieval_queries.yaml
# (1.5 and 2.0 tied there; the smaller was kept) and checked on the held-out odd half, where it
# beat unweighted RRF too; benchmarks/results/retrieval.md reports both halves.
FUSION_WEIGHTS = (1.5, 1.0)


class VectorSearch(Protocol):
    def query(self, text: str, k: int, layers: tuple[str, ...] | None = None) -> list[tuple[str, float]]: ...


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    layer: str
    source: str
    title: str
    text: str
    kind: str
    score: float                       # fused score (hybrid) or the single ranker's score
    keyword_rank: int | None = None    # 1-based rank in the bm25 list, None when absent
    vector_rank: int | None = None
    content_hash: str = ""


def rrf(rankings: list[list[str]], k0: int = RRF_K,
        weights: list[float] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked id lists; ties broken by id so results are deterministic."""
    weights = weights or [1.0] * len(rankings)
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, cid in enumerate(ranking, start=1):
            scores[cid] = scores.get(cid, 0.0) + w / (k0 + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown retrieval mode {mode!r}; modes: {', '.join(MODES)}")
    return mode


def search(catalog: Catalog, vectors: VectorSearch | None, text: str, k: int = 5,
           layers: tuple[str, ...] | None = None, mode: str = "hybrid",
           depth: int = CANDIDATES, weights: tuple[float, float] = FUSION_WEIGHTS) -> list[Hit]:
    """The k best chunks for `text`. Without `vectors`, every mode falls back to keyword search
    (the caller has already warned that vector search is unavailable)."""
    check_mode(mode)
    if not text.strip() or k <= 0:
        return []
    if vectors is None:
        mode = "keyword"
    depth = max(depth, k)
    kw = catalog.keyword_search(text, depth, layers) if mode in ("hybrid", "keyword") else []
    vec = vectors.query(text, depth, layers) if vectors is not None and mode in ("hybrid", "vector") else []
    kw_rank = {cid: i for i, (cid, _) in enumerate(kw, start=1)}
    vec_rank = {cid: i for i, (cid, _) in enumerate(vec, start=1)}
    if mode == "keyword":
        ranked = kw
    elif mode == "vector":
        ranked = vec
    else:
        ranked = rrf([[cid for cid, _ in kw], [cid for cid, _ in vec]], weights=list(weights))
    rows = catalog.chunks(cid for cid, _ in ranked)
    hits: list[Hit] = []
    for cid, score in ranked:
        row = rows.get(cid)
        if row is None:     # the vector store lags the catalogue (chunk removed since): skip it
            continue
        if len(hits) == k:
            break
        hits.append(Hit(cid, row.layer, row.source, row.title, row.text, row.kind, float(score),
                        kw_rank.get(cid), vec_rank.get(cid), row.hash))
    return hits
