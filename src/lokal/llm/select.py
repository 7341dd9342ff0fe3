"""Tool preselection: rank the tools on offer against the question, offer the model the top k.

A 135M model chooses badly among many tools and reads a long tools list slowly (prompt
evaluation dominates a decision on the CPU: about 5 ms per prompt token on 2 cores). Before a
decision, every tool is ranked against the user's question by two retrievers over the tool's
name, description and parameter names, the same two that ``lokal rag`` uses for documents:

- BM25 (bm25s) on words, with snake_case and camelCase names split into words;
- all-MiniLM-L6-v2 cosine similarity (``lokal.rag.embeddings``; tool vectors are cached),
  less the tool's mean similarity to a fixed set of generic requests (``BACKGROUND``).

Both rankings are fused by reciprocal rank fusion. Tools named in the question, tools already
called since the question, and tools the profile marks ``always`` stay on offer whatever their
rank. Tools the profile lists ``on_request`` (the memory tool ``remember``) are offered only
when the question asks for them: saving a note is not a way to write one for Tom. The
selection depends only on the question and those sets, so every decision of one run sees the
same tools, and a backend's prompt cache keeps working from step to step.

``Selection.similarity`` (the best cosine of an offered tool) also tells the staged decision
how close the question is to any tool at all (see ``lokal.llm.staged``).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from lokal.messages import last_user_text
from lokal.tools.schema import ToolSpec

__all__ = [
    "Selection",
    "ToolScore",
    "ToolSelector",
    "bm25_text",
    "default_selector",
    "name_words",
    "tool_document",
]

_SPLIT_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"  # kana, Han, Hangul: a class's ranges
_CJK_RUN = re.compile(f"[{CJK}]+")

# Generic requests no tool is made for. A tool's similarity to a question is reduced by its
# mean similarity to these, because some tool descriptions ("run code", "save a note") are
# close to everything ("hubs" of the embedding space); measured on the development cases,
# this separates questions that need a tool from those that do not better (AUC 0.97 vs 0.95).
BACKGROUND = (
    "Hello, how are you today?",
    "Tell me about the history of art.",
    "What is your favourite colour?",
    "Explain how photosynthesis works.",
    "Write a short poem about autumn.",
    "Can you recommend a good book?",
    "What does democracy mean?",
    "Give me some advice on learning to cook.",
    "Why is the sky blue?",
    "Summarise the plot of a famous novel.",
    "What are the benefits of exercise?",
    "I feel tired today, any tips?",
    "Who invented the telephone?",
    "Describe a typical day of a farmer.",
    "What is the meaning of life?",
    "How do I make friends in a new city?",
)


_QUERIES = 256  # question vectors a selector keeps


class _Embedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class ToolScore:
    """One tool's rank: fused score, similarity (cosine minus the tool's mean cosine to
    generic requests), BM25 score, and why it is pinned."""

    name: str
    score: float
    similarity: float
    bm25: float
    pinned: str | None = None  # "named" | "called" | "always"


@dataclass
class Selection:
    """The tools offered for one decision and the ranking they came from (best first)."""

    query: str
    offered: list[str]
    ranking: list[ToolScore]
    k: int | None
    dense: bool = True
    notes: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # on-request tools the question did not ask for

    @property
    def similarity(self) -> float:
        """The best similarity between the question and an offered tool."""
        offered = set(self.offered)
        return max((t.similarity for t in self.ranking if t.name in offered), default=0.0)

    @property
    def similarity_uncalled(self) -> float:
        """The best similarity of an offered tool not yet called since the question: once
        results are in, how much of the request is still to do."""
        offered = set(self.offered)
        return max(
            (t.similarity for t in self.ranking if t.name in offered and t.pinned != "called"),
            default=0.0,
        )

    def similarity_among(self, names: set[str]) -> float:
        """The best similarity of an offered tool among ``names``."""
        return max(
            (t.similarity for t in self.ranking if t.name in names and t.name in self.offered),
            default=0.0,
        )

    def bm25(self, *, uncalled: bool = False, among: set[str] | None = None) -> float:
        """The best BM25 score of an offered tool (not yet called since the question, with
        ``uncalled``; one of ``among``, when given), capped at 5 (BM25 has no fixed
        scale)."""
        offered = set(self.offered)
        scores = [
            t.bm25
            for t in self.ranking
            if t.name in offered
            and not (uncalled and t.pinned == "called")
            and (among is None or t.name in among)
        ]
        return min(5.0, max(scores, default=0.0))

    def score_of(self, name: str) -> ToolScore | None:
        return next((t for t in self.ranking if t.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query[:500],
            "k": self.k,
            "offered": self.offered,
            **({"held": self.held} if self.held else {}),
            "dense": self.dense,
            "ranking": [
                {
                    "name": t.name,
                    "score": round(t.score, 4),
                    "similarity": round(t.similarity, 4),
                    "bm25": round(t.bm25, 4),
                    **({"pinned": t.pinned} if t.pinned else {}),
                }
                for t in self.ranking
            ],
            **({"notes": self.notes} if self.notes else {}),
        }


def name_words(name: str) -> str:
    return " ".join(_SPLIT_CAMEL.sub(" ", name).replace("_", " ").replace(".", " ").split())


def tool_document(tool: ToolSpec) -> str:
    """The text a tool is ranked by: its name as words, description, parameter names (as
    words), their descriptions and enum values."""
    parts = [name_words(tool.name), tool.description]
    for name, spec in tool.properties.items():
        line = name_words(name)
        if isinstance(spec, dict):
            if spec.get("description"):
                line += ": " + str(spec["description"])
            if isinstance(spec.get("enum"), list):
                line += " (" + ", ".join(str(v) for v in spec["enum"][:20]) + ")"
        parts.append(line)
    return "\n".join(p for p in parts if p)


def bm25_text(text: str) -> str:
    """Text for BM25: snake_case and camelCase split into words, runs of CJK characters
    written as overlapping character pairs (Chinese and Japanese have no spaces)."""
    text = _SPLIT_CAMEL.sub(" ", text).replace("_", " ")

    def pairs(match: re.Match[str]) -> str:
        run = match.group(0)
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "

    return _CJK_RUN.sub(pairs, text)


def called_since_question(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Names of the tools called after the last user message, in order, without repeats."""
    names: list[str] = []
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        for call in message.get("tool_calls") or []:
            if call.get("name") and call["name"] not in names:
                names.append(call["name"])
    return list(reversed(names))


def _named_in(text: str, name: str) -> bool:
    folded = text.casefold()
    return name.casefold() in folded or (
        "_" in name and name_words(name).casefold() in " ".join(folded.split())
    )


class ToolSelector:
    """Ranks tools against a question; ``select`` applies top-k and the pinned tools.

    ``embedder``: anything with ``embed(texts) -> unit vectors`` (default: the local MiniLM,
    loaded on first use). When no embedder can be loaded, BM25 ranks alone (``dense=False``).
    """

    def __init__(self, embedder: _Embedder | None = None, *, use_embeddings: bool = True) -> None:
        self._embedder = embedder
        self._use_embeddings = use_embeddings
        self._vectors: dict[str, np.ndarray] = {}
        self._hubness: dict[str, float] = {}
        self._background: np.ndarray | None = None
        self._lock = threading.Lock()
        self._dense_error: str | None = None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()  # the latest questions

    def _query_vector(self, query: str) -> np.ndarray | None:
        """``query``'s vector (as a 1-row array), from the cache of the last ``_QUERIES``
        questions: every decision of a run, and every request of a served conversation until
        its next question, ranks the tools against the same question."""
        with self._lock:
            vector = self._queries.get(query)
            if vector is not None:
                self._queries.move_to_end(query)
                return vector
        vector = self._embed([query])
        if vector is not None:
            with self._lock:
                self._queries[query] = vector
                while len(self._queries) > _QUERIES:
                    self._queries.popitem(last=False)
        return vector

    def _embed(self, texts: list[str]) -> np.ndarray | None:
        if not self._use_embeddings:
            return None
        if self._embedder is None:
            try:
                from lokal.rag.embeddings import LocalEmbedder

                self._embedder = LocalEmbedder()
                self._embedder.embed(["warm up"])
            except Exception as exc:  # not installed, or the weights are missing
                self._use_embeddings = False
                self._dense_error = f"embeddings unavailable, BM25 only: {exc}"
                return None
        return self._embedder.embed(texts)

    @property
    def dense_error(self) -> str | None:
        """Why the embedding model could not load (BM25 ranks alone), if it could not."""
        return self._dense_error

    def embed_texts(self, texts: list[str]) -> np.ndarray | None:
        """Unit vectors of ``texts`` by the selector's embedding model (loaded on first use),
        or None when embeddings are off or cannot load."""
        return self._embed(texts)

    def load(self) -> bool | None:
        """Load the embedding model and embed the background requests now, before any tool
        is known (``lokal serve`` does at start, so that no request does). None when there
        was nothing to do (loaded already, or embeddings off); else whether dense similarity
        is available."""
        with self._lock:
            if not self._use_embeddings or (
                self._embedder is not None and self._background is not None
            ):
                return None
            self._background = self._embed(list(BACKGROUND))
            return self._background is not None

    @property
    def loaded(self) -> bool:
        """Whether the embedding model is loaded (and the background requests embedded)."""
        return self._embedder is not None and self._background is not None

    def prepare(self, tools: Sequence[ToolSpec]) -> bool | None:
        """Load the embedding model and embed ``tools`` (and the background requests) now,
        so that no decision does it: ``lokal run`` reports this as a load step of its own.
        None when there was nothing to do (loaded and embedded already, or embeddings off);
        else whether dense similarity is available."""
        documents = [tool_document(t) for t in tools]
        if not self._use_embeddings or not documents:
            return None
        with self._lock:
            if self._embedder is not None and all(d in self._vectors for d in documents):
                return None
        return self._tool_vectors(documents) is not None

    def _tool_vectors(self, documents: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """The unit vectors of ``documents`` and each one's mean cosine to the background
        requests (both cached per document)."""
        with self._lock:
            missing = [d for d in dict.fromkeys(documents) if d not in self._vectors]
            if missing:
                if self._background is None:
                    self._background = self._embed(list(BACKGROUND))
                vectors = self._embed(missing)
                if vectors is None or self._background is None:
                    return None
                self._vectors.update(zip(missing, vectors, strict=True))
                hub = vectors @ self._background.T
                self._hubness.update(zip(missing, hub.mean(axis=1), strict=True))
            return (
                np.stack([self._vectors[d] for d in documents]),
                np.array([self._hubness[d] for d in documents]),
            )

    def rank(self, query: str, tools: Sequence[ToolSpec]) -> tuple[list[ToolScore], bool]:
        """Every tool, best first, and whether dense similarity took part."""
        from lokal.rag.retrieval import BM25Index, rrf

        if not tools:
            return [], False
        names = [t.name for t in tools]
        documents = [tool_document(t) for t in tools]
        sparse_scores = dict.fromkeys(names, 0.0)
        index = BM25Index(names, [bm25_text(d) for d in documents])
        for name, value in index.search(bm25_text(query), k=len(names)):
            sparse_scores[name] = value
        sparse_rank = [
            n for n in sorted(names, key=lambda n: -sparse_scores[n]) if sparse_scores[n] > 0
        ]
        found = self._tool_vectors(documents) if query.strip() else None
        similarity = dict.fromkeys(names, 0.0)
        rankings = [sparse_rank]
        if found is not None:
            question = self._query_vector(query)
            if question is not None:
                vectors, hubness = found
                cosines = vectors @ question[0] - hubness
                similarity = {n: float(c) for n, c in zip(names, cosines, strict=True)}
                rankings.insert(0, sorted(names, key=lambda n: -similarity[n]))
        fused = dict(rrf(rankings))
        order = sorted(names, key=lambda n: (-fused.get(n, 0.0), -similarity[n], names.index(n)))
        ranking = [ToolScore(n, fused.get(n, 0.0), similarity[n], sparse_scores[n]) for n in order]
        return ranking, found is not None

    def select(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[ToolSpec],
        *,
        k: int | None,
        always: Iterable[str] = (),
        on_request: dict[str, str] | None = None,
    ) -> Selection:
        """Rank ``tools`` against the last user message; offer the top ``k``
        plus the tools named in it, called since it, or marked ``always``. A tool of
        ``on_request`` (name: pattern) is offered only when it is one of those or the
        question matches its pattern (case-insensitive); otherwise it is ``held``."""
        query = last_user_text(messages)
        ranking, dense = self.rank(query, tools)
        called = set(called_since_question(messages))
        always = set(always)
        pinned: dict[str, str] = {}
        for score in ranking:
            if score.name in always:
                pinned[score.name] = "always"
            elif score.name in called:
                pinned[score.name] = "called"
            elif _named_in(query, score.name):
                pinned[score.name] = "named"
        ranking = [
            ToolScore(s.name, s.score, s.similarity, s.bm25, pinned.get(s.name)) for s in ranking
        ]
        held = [
            s.name
            for s in ranking
            if s.name in (on_request or {})
            and s.name not in pinned
            and not re.search(on_request[s.name], query, re.IGNORECASE)
        ]
        candidates = [s for s in ranking if s.name not in held]
        if k is None or k >= len(candidates):
            offered = [s.name for s in candidates]
        else:
            top = {s.name for s in candidates[:k]}
            offered = [s.name for s in candidates if s.name in top or s.name in pinned]
        notes = [self._dense_error] if self._dense_error else []
        return Selection(query, offered, ranking, k, dense, notes, held)


_DEFAULT: ToolSelector | None = None
_DEFAULT_LOCK = threading.Lock()


def default_selector() -> ToolSelector:
    """The process-wide selector (its tool vectors are cached across decisions)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = ToolSelector()
        return _DEFAULT
