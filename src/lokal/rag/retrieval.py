"""Retrieval: cosine top-k from the store, BM25 (bm25s) over the same chunks, and hybrid —
both lists fused by reciprocal rank fusion (score = sum of 1 / (60 + rank))."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from lokal.rag.embeddings import Embedder
from lokal.rag.stores import Hit, VectorStore

__all__ = ["STOPWORDS", "BM25Index", "LazyRetriever", "Retriever", "rrf"]

RRF_K = 60
_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = (
    "a an and are as at be by do does for from has have how i in is it its of on or that the "
    "this to was what when where which who why will with you your can"
)
STOPWORDS = frozenset(_STOPWORDS.split())


def tokenize(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25Index:
    """BM25 (bm25s, Lucene variant) over a fixed list of items with a ``.text``."""

    def __init__(self, items: Sequence[Any], texts: Sequence[str] | None = None) -> None:
        import bm25s

        self.items = list(items)
        texts = list(texts) if texts is not None else [item.text for item in self.items]
        self.model = bm25s.BM25()
        self.model.index([tokenize(t) or ["_"] for t in texts], show_progress=False)
        self.vocab = self.model.vocab_dict

    def search(self, query: str, k: int = 5) -> list[tuple[Any, float]]:
        if not self.items:
            return []
        words = [w for w in tokenize(query) if w in self.vocab]
        if not words:
            return []
        scores = self.model.get_scores(words)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.items[i], float(scores[i])) for i in order if scores[i] > 0]


def rrf(
    rankings: list[list[Any]], key=lambda item: item, k: int = RRF_K
) -> list[tuple[Any, float]]:
    """Reciprocal rank fusion of several rankings (best first): ``sum 1/(k + rank)``."""
    scores: dict[Any, float] = {}
    first: dict[Any, Any] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            ident = key(item)
            scores[ident] = scores.get(ident, 0.0) + 1.0 / (k + rank)
            first.setdefault(ident, item)
    ordered = sorted(scores, key=lambda ident: -scores[ident])
    return [(first[ident], scores[ident]) for ident in ordered]


Method = Literal["vector", "bm25", "hybrid"]


class Retriever:
    """Searches one store with one embedder: ``vector``, ``bm25`` or ``hybrid`` (default)."""

    def __init__(self, store: VectorStore, embedder: Embedder, candidates: int = 20) -> None:
        self.store = store
        self.embedder = embedder
        self.candidates = candidates
        self._bm25: BM25Index | None = None
        self._bm25_count = -1

    def bm25(self) -> BM25Index:
        count = self.store.count()
        if self._bm25 is None or count != self._bm25_count:
            self._bm25 = BM25Index(self.store.chunks())
            self._bm25_count = count
        return self._bm25

    def _filter(self, hits: list[Hit], where: dict[str, Any] | None) -> list[Hit]:
        if not where:
            return hits

        def ok(hit: Hit) -> bool:
            for key, value in where.items():
                got = getattr(hit, key, None) if key in ("source", "heading") else None
                got = hit.metadata.get(key) if got is None else got
                allowed = value if isinstance(value, list | tuple | set) else [value]
                if got not in allowed:
                    return False
            return True

        return [h for h in hits if ok(h)]

    def best_cosine(self, query: str, where: dict[str, Any] | None = None) -> float:
        """The cosine similarity of ``query`` to its closest chunk (0.0 for an empty store).

        This, not a hybrid score, is what a relevance threshold can use: the fused score
        ``sum 1/(60 + rank)`` only says how a chunk ranks among the others, and the best
        chunk of any store gets about the same fused score for any question."""
        hits = self.store.query(self.embedder.embed([query])[0], k=1, where=where)
        return float(hits[0].score) if hits else 0.0

    def search(
        self,
        query: str,
        k: int = 5,
        method: Method = "hybrid",
        where: dict[str, Any] | None = None,
    ) -> list[Hit]:
        if method == "bm25":
            found = self.bm25().search(query, max(k, self.candidates) if where else k)
            hits = [_scored(h, s) for h, s in found]
            return self._filter(hits, where)[:k]
        vector = self.embedder.embed([query])[0]
        if method == "vector":
            return self.store.query(vector, k=k, where=where)
        if method != "hybrid":
            raise ValueError("method must be vector, bm25 or hybrid")
        n = max(k, self.candidates)
        dense = self.store.query(vector, k=n, where=where)
        sparse = self._filter([h for h, _ in self.bm25().search(query, n * 2)], where)[:n]
        fused = rrf([dense, sparse], key=lambda h: h.id)
        return [_scored(hit, score) for hit, score in fused[:k]]


class LazyRetriever:
    """A Retriever opened on first use: ``opener()`` (e.g. ``open_rag``: the store and the
    embedder) runs when a search is first asked for, so an agent that has a document tool but
    never calls it opens nothing and loads no embedding model."""

    def __init__(
        self, opener: Callable[[], tuple[VectorStore, Embedder]], candidates: int = 20
    ) -> None:
        self._opener = opener
        self._candidates = candidates
        self._retriever: Retriever | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self._retriever is not None

    def retriever(self) -> Retriever:
        with self._lock:
            if self._retriever is None:
                store, embedder = self._opener()
                self._retriever = Retriever(store, embedder, self._candidates)
            return self._retriever

    def search(self, query: str, k: int = 5, method: Method = "hybrid", where=None) -> list[Hit]:
        return self.retriever().search(query, k=k, method=method, where=where)

    def best_cosine(self, query: str, where: dict[str, Any] | None = None) -> float:
        return self.retriever().best_cosine(query, where=where)


def _scored(hit: Hit, score: float) -> Hit:
    return Hit(
        source=hit.source,
        index=hit.index,
        text=hit.text,
        score=score,
        heading=hit.heading,
        start=hit.start,
        end=hit.end,
        metadata=hit.metadata,
    )
