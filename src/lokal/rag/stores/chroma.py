"""The scale-out store: a Chroma server (``chroma run --path DIR --port P``) over HTTP."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlparse

import numpy as np

from lokal.rag.types import Chunk, Hit

__all__ = ["ChromaStore"]

_RESERVED = {"source", "idx", "heading", "start", "end", "source_hash", "extra"}


def _where(where: dict[str, Any] | None) -> dict[str, Any] | None:
    if not where:
        return None
    clauses = []
    for key, value in where.items():
        key = "idx" if key == "index" else key
        if isinstance(value, list | tuple | set):
            clauses.append({key: {"$in": list(value)}})
        else:
            clauses.append({key: {"$eq": value}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class ChromaStore:
    name = "chroma"

    def __init__(self, url: str, collection: str = "lokal") -> None:
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import chromadb
        from chromadb.config import Settings

        parsed = urlparse(url if "://" in url else f"http://{url}")
        self.client = chromadb.HttpClient(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 8000,
            ssl=parsed.scheme == "https",
            settings=Settings(anonymized_telemetry=False),
        )
        self.collection = self.client.get_or_create_collection(
            collection, metadata={"hnsw:space": "cosine"}, embedding_function=None
        )

    def add(self, chunks: list[Chunk], vectors: np.ndarray, source_hash: str = "") -> None:
        for source in {c.source for c in chunks}:
            self.delete_source(source)
        if not chunks:
            return
        metadatas = []
        for chunk in chunks:
            meta: dict[str, Any] = {
                "source": chunk.source,
                "idx": chunk.index,
                "heading": chunk.heading,
                "start": chunk.start,
                "end": chunk.end,
                "source_hash": source_hash,
            }
            for key, value in chunk.metadata.items():
                if key not in _RESERVED and isinstance(value, str | int | float | bool):
                    meta[key] = value
            metadatas.append(meta)
        for i in range(0, len(chunks), 1000):
            part = slice(i, i + 1000)
            self.collection.add(
                ids=[c.id for c in chunks[part]],
                embeddings=np.asarray(vectors[part], dtype=np.float32).tolist(),
                documents=[c.text for c in chunks[part]],
                metadatas=metadatas[part],
            )

    def delete_source(self, source: str) -> int:
        found = self.collection.get(where={"source": source}, include=[])
        if found["ids"]:
            self.collection.delete(ids=found["ids"])
        return len(found["ids"])

    @staticmethod
    def _hit(text: str, meta: dict[str, Any], score: float) -> Hit:
        extra = {k: v for k, v in meta.items() if k not in _RESERVED}
        return Hit(
            source=meta["source"],
            index=int(meta["idx"]),
            text=text,
            heading=meta.get("heading", ""),
            start=int(meta.get("start", 0)),
            end=int(meta.get("end", 0)),
            metadata=extra,
            score=score,
        )

    def query(
        self, vector: np.ndarray, k: int = 5, where: dict[str, Any] | None = None
    ) -> list[Hit]:
        if self.count() == 0:
            return []
        result = self.collection.query(
            query_embeddings=[np.asarray(vector, dtype=np.float32).reshape(-1).tolist()],
            n_results=k,
            where=_where(where),
            include=["documents", "metadatas", "distances"],
        )
        return [
            self._hit(text, meta, 1.0 - dist)
            for text, meta, dist in zip(
                result["documents"][0], result["metadatas"][0], result["distances"][0], strict=True
            )
        ]

    def chunks(self, where: dict[str, Any] | None = None) -> list[Hit]:
        result = self.collection.get(where=_where(where), include=["documents", "metadatas"])
        hits = [
            self._hit(t, m, 0.0)
            for t, m in zip(result["documents"], result["metadatas"], strict=True)
        ]
        return sorted(hits, key=lambda h: (h.source, h.index))

    def sources(self) -> dict[str, str]:
        result = self.collection.get(include=["metadatas"])
        return {m["source"]: m.get("source_hash", "") for m in result["metadatas"]}

    def count(self) -> int:
        return self.collection.count()

    def persist(self) -> None:
        """The server persists on every write."""

    def close(self) -> None:
        return None

    def __repr__(self) -> str:  # pragma: no cover
        return json.dumps({"store": "chroma", "collection": self.collection.name})
