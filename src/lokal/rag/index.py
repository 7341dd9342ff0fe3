"""Indexing: files → documents → chunks → cached embeddings → a store.

A source whose content hash is unchanged is skipped; a changed one has its chunks replaced;
the embedding cache (SQLite, keyed by content hash) means unchanged chunk texts are never
embedded twice. A source's hash includes the embedder's name (model, backend, weights), so
indexing again with another embedding backend re-embeds every source: one index never holds
the vectors of two backends.

Chunks are embedded in batches that span documents (at least ``batch_chunks`` texts per call
to the embedder, 64 by default): a folder of short files embeds like one long text, sorted
by length and cut into full batches, instead of one small call per file
(docs/performance.md measures both).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lokal.rag.chunking import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, chunk_text
from lokal.rag.embeddings import CachedEmbedder, Embedder, content_hash, get_embedder
from lokal.rag.loaders import Document, load_directory, load_file
from lokal.rag.stores import VectorStore, default_store_path, open_store

if TYPE_CHECKING:
    from lokal.config import EmbeddingSettings

__all__ = ["IndexReport", "Indexer", "open_rag"]


@dataclass
class IndexReport:
    files: int = 0
    skipped: int = 0
    chunks: int = 0
    embedded: int = 0
    removed_sources: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


class Indexer:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        overlap: int = DEFAULT_OVERLAP,
        batch_chunks: int = 64,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.batch_chunks = max(1, batch_chunks)

    def index_documents(self, documents, *, prune: bool = False) -> IndexReport:
        started = time.perf_counter()
        report = IndexReport()
        known = self.store.sources()
        seen: set[str] = set()
        before = getattr(self.embedder, "misses", None)
        waiting: list[tuple[list, str]] = []  # (chunks, source hash) of documents to embed

        def flush() -> None:
            texts = [_embed_text(c) for chunks, _ in waiting for c in chunks]
            vectors = self.embedder.embed(texts)
            start = 0
            for chunks, digest in waiting:
                self.store.add(chunks, vectors[start : start + len(chunks)], source_hash=digest)
                start += len(chunks)
                report.chunks += len(chunks)
                if before is None:
                    report.embedded += len(chunks)
            waiting.clear()

        for doc in documents:
            report.files += 1
            seen.add(doc.source)
            digest = content_hash(
                f"{self.max_tokens}/{self.overlap}/{getattr(self.embedder, 'name', '')}\n"
                + doc.text
            )
            if known.get(doc.source) == digest:
                report.skipped += 1
                continue
            chunks = chunk_text(
                doc.text,
                doc.source,
                max_tokens=self.max_tokens,
                overlap=self.overlap,
                markdown=doc.metadata.get("type") in ("md", "markdown", "html", "docx", "txt"),
                metadata=doc.metadata,
            )
            if not chunks:
                self.store.delete_source(doc.source)
                continue
            waiting.append((chunks, digest))
            if sum(len(c) for c, _ in waiting) >= self.batch_chunks:
                flush()
        if waiting:
            flush()
        if prune:
            for source in set(known) - seen:
                self.store.delete_source(source)
                report.removed_sources.append(source)
        if before is not None:
            report.embedded = self.embedder.misses - before  # type: ignore[attr-defined]
        self.store.persist()
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def index_path(self, path: str | Path, *, progress: bool = False) -> IndexReport:
        path = Path(path)
        if path.is_dir():
            return self.index_documents(load_directory(path, progress=progress), prune=True)
        return self.index_documents([load_file(path, root=path.parent)])


def _embed_text(chunk) -> str:
    """What is embedded: the heading path gives a chunk its context."""
    return f"{chunk.heading}\n{chunk.text}" if chunk.heading else chunk.text


def open_rag(
    store: str = "sqlite",
    *,
    store_path: str | Path | None = None,
    chroma_url: str | None = None,
    collection: str = "lokal",
    embeddings_url: str | None = None,
    cache_path: str | Path | None = None,
    embeddings: EmbeddingSettings | None = None,
) -> tuple[VectorStore, CachedEmbedder]:
    """A store and a cached embedder (the cache sits next to the SQLite index, or in
    ``$LOKAL_HOME/rag/`` for a server store). ``embeddings``: how the local MiniLM runs
    (default ``lokal.rag.embeddings.local_settings()``)."""
    vs = open_store(store, path=store_path, url=chroma_url, collection=collection)
    if cache_path is None:
        base = Path(store_path).parent if store_path else default_store_path().parent
        cache_path = base / "embedding_cache.db"
    return vs, CachedEmbedder(get_embedder(embeddings_url, settings=embeddings), cache_path)


def documents_from_texts(items: dict[str, str]) -> list[Document]:
    return [Document(source=k, text=v, metadata={"type": "md"}) for k, v in items.items()]
