"""Vector stores behind one interface: ``add``, ``delete_source``, ``query`` (top-k, cosine,
metadata filters), ``chunks``, ``sources``, ``count``, ``persist``, ``close``.

- ``SqliteVecStore`` (default): one SQLite file with the sqlite-vec extension;
- ``ChromaStore``: a Chroma server over HTTP (``chroma run --path DIR --port P``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from lokal.errors import LokalError
from lokal.paths import index_path
from lokal.rag.types import Chunk, Hit

__all__ = ["Hit", "VectorStore", "default_store_path", "open_store"]


class VectorStore(Protocol):
    name: str

    def add(self, chunks: list[Chunk], vectors: np.ndarray, source_hash: str = "") -> None: ...

    def delete_source(self, source: str) -> int: ...

    def query(
        self, vector: np.ndarray, k: int = 5, where: dict[str, Any] | None = None
    ) -> list[Hit]: ...

    def chunks(self, where: dict[str, Any] | None = None) -> list[Hit]: ...

    def sources(self) -> dict[str, str]: ...

    def count(self) -> int: ...

    def persist(self) -> None: ...

    def close(self) -> None: ...


def default_store_path() -> Path:
    """``$LOKAL_HOME/rag/index.db`` (``lokal.paths.index_path``)."""
    return index_path()


def open_store(
    kind: str = "sqlite",
    *,
    path: str | Path | None = None,
    url: str | None = None,
    collection: str = "lokal",
    dim: int = 384,
) -> VectorStore:
    """``sqlite`` (``path``, default ``$LOKAL_HOME/rag/index.db``) or ``chroma`` (``url``)."""
    if kind == "sqlite":
        from lokal.rag.stores.sqlite_vec import SqliteVecStore

        return SqliteVecStore(path or default_store_path(), dim=dim)
    if kind == "chroma":
        from lokal.rag.stores.chroma import ChromaStore

        return ChromaStore(url or "http://127.0.0.1:8000", collection=collection)
    raise LokalError(f"unknown store {kind!r}; use sqlite or chroma")
