"""The retrieval side of a RAG answer: the numbered passages put in the prompt, the relevance
threshold, and the check that cited passages support the answer (``[1]`` → ``source#chunk``).
The model's answer itself is made by ``lokal.llm.answer.answer_question``.

Two checks keep answers honest (thresholds calibrated by ``benchmarks/calibrate_thresholds.py``
on ``data/rag_eval/``, see docs/rag.md):

- **relevance**: when the question's cosine similarity to the closest chunk is below
  ``RAG_MIN_SCORE``, the documents do not hold the answer: ``NOT_FOUND``, the model is not asked;
- **citation support**: a cited passage counts only when the answer sentence that cites it
  shares at least ``CITATION_MIN_OVERLAP`` of its content words with the passage.
"""

from __future__ import annotations

import re
from typing import Any

from lokal.rag.retrieval import Method, Retriever
from lokal.rag.stores import Hit

__all__ = [
    "CITATION_MIN_OVERLAP",
    "NOT_FOUND",
    "RAG_MIN_SCORE",
    "build_rag_messages",
    "citation_record",
    "citation_support",
    "default_min_score",
    "knowledge_search_tool",
    "support_overlap",
]

NOT_FOUND = "The documents do not contain this information."

# Calibrated by benchmarks/calibrate_thresholds.py (numbers in docs/rag.md), for
# all-MiniLM-L6-v2: the question's cosine to its closest chunk. It keeps all 41 answerable
# questions of data/rag_eval/questions.json and turns away 18 of the 40 of unanswerable.json
# (all 10 off-topic ones) before the model is asked.
RAG_MIN_SCORE = 0.31
# The share of a sentence's content words (lower-cased, stop words dropped, cut to 5 letters)
# that its cited passage must hold; calibrated on data/rag_eval/answers.json (right answers vs
# the chunk that holds them and chunks that do not: supported 0.78 or more, unsupported 0.63 or
# less).
CITATION_MIN_OVERLAP = 0.7


def default_min_score(embedder: Any) -> float:
    """``RAG_MIN_SCORE`` for the embedding model it was calibrated with (all-MiniLM-L6-v2,
    on any local backend: its name is ``all-MiniLM-L6-v2@BACKEND:WEIGHTS``); 0.0 (no
    threshold) for any other, whose cosines are on another scale."""
    from lokal.rag.embeddings import MINILM

    name = str(getattr(embedder, "name", None))
    return RAG_MIN_SCORE if name == MINILM or name.startswith(f"{MINILM}@") else 0.0


RAG_SYSTEM = (
    "You answer questions using only the numbered context passages you are given. "
    "Do not use any other knowledge."
)
RAG_PROMPT = """Use the context below to answer the question.
Question: {question}
Context:
```
{context}
```
Rules: answer only from the context. After each fact, cite the passage it came from as [n].
If the context does not let you answer, reply exactly: "{not_found}"
Answer:"""


def format_context(hits: list[Hit], max_chars: int = 1200) -> str:
    parts = []
    for n, hit in enumerate(hits, start=1):
        where = hit.id + (f" — {hit.heading}" if hit.heading else "")
        parts.append(f"[{n}] ({where})\n{hit.text[:max_chars]}")
    return "\n\n".join(parts)


def build_rag_messages(question: str, hits: list[Hit]) -> list[dict[str, str]]:
    prompt = RAG_PROMPT.format(question=question, context=format_context(hits), not_found=NOT_FOUND)
    return [{"role": "system", "content": RAG_SYSTEM}, {"role": "user", "content": prompt}]


def citation_record(n: int, hit: Hit) -> dict[str, Any]:
    return {
        "n": n,
        "id": hit.id,
        "source": hit.source,
        "chunk": hit.index,
        "heading": hit.heading,
        "score": round(float(hit.score), 6),
        "text": hit.text,
    }


# words that carry no content in an answer sentence, on top of retrieval's stop words
_ANSWER_STOPWORDS = (
    "yes no not also so but than then there their they them its about into each all any "
    "one ones only very more most such these those been being were had has would should "
    "could may might must shall"
)
_ANSWER_STOP = frozenset(_ANSWER_STOPWORDS.split())
_CONTENT = re.compile(r"[^\W_]+", re.UNICODE)
_MARKER = re.compile(r"\[(\d+)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _content_words(text: str) -> set[str]:
    """Lower-cased words (letters and digits; ``busy_timeout`` is two words) minus stop
    words, cut to their first 5 letters (a crude stem: ``quantized`` ~ ``quantization``)."""
    from lokal.rag.retrieval import STOPWORDS

    words = _CONTENT.findall(_MARKER.sub(" ", text).lower())
    return {
        w[:5]
        for w in words
        if w not in STOPWORDS and w not in _ANSWER_STOP and (len(w) > 1 or w.isdigit())
    }


def support_overlap(sentence: str, passage: str) -> float:
    """The share of ``sentence``'s content words that ``passage`` holds (0 for a sentence
    without content words, e.g. only ``[1]``)."""
    words = _content_words(sentence)
    return len(words & _content_words(passage)) / len(words) if words else 0.0


def _citing_sentences(text: str) -> list[tuple[str, list[int]]]:
    """The answer's sentences, each with the passage numbers it cites; a marker alone on
    its line or after the full stop (``… works. [1]``) belongs to the sentence before it."""
    out: list[tuple[str, list[int]]] = []
    for piece in _SENTENCE_END.split(text or ""):
        piece = piece.strip()
        if not piece:
            continue
        numbers = [int(n) for n in _MARKER.findall(piece)]
        if out and numbers and not _content_words(piece):
            out[-1] = (out[-1][0], out[-1][1] + numbers)
        else:
            out.append((piece, numbers))
    return out


def citation_support(
    text: str, hits: list[Hit], min_overlap: float = CITATION_MIN_OVERLAP
) -> dict[str, list[dict[str, Any]]]:
    """Which passages an answer cites with support: ``cited`` (the sentence citing ``[n]``
    shares at least ``min_overlap`` of its content words with passage n), ``unsupported``
    (cited, but the passage does not hold the sentence's words) and ``uncited`` (given, not
    cited). When the answer has no usable marker at all, each sentence is credited to the
    passage that holds most of its words, if that passage holds ``min_overlap`` of them
    (``by: "overlap"`` instead of ``"model"``)."""
    cited: dict[int, dict[str, Any]] = {}
    unsupported: dict[int, dict[str, Any]] = {}
    sentences = _citing_sentences(text)
    marked = any(1 <= n <= len(hits) for _, numbers in sentences for n in numbers)
    for sentence, numbers in sentences:
        if not marked:
            scores = [(support_overlap(sentence, h.text), n) for n, h in enumerate(hits, 1)]
            best, n = max(scores, default=(0.0, 0))
            if n and best >= min_overlap:
                numbers = [n]
        for n in dict.fromkeys(numbers):
            if not 1 <= n <= len(hits):
                continue
            hit = hits[n - 1]
            overlap = round(support_overlap(sentence, hit.text), 3)
            entry = {
                "n": n,
                "id": hit.id,
                "source": hit.source,
                "chunk": hit.index,
                "overlap": overlap,
                "by": "model" if marked else "overlap",
            }
            if overlap >= min_overlap:
                if overlap > cited.get(n, {}).get("overlap", -1.0):
                    cited[n] = entry
            elif n not in cited:
                unsupported.setdefault(n, {**entry, "sentence": sentence})
    unsupported = {n: e for n, e in unsupported.items() if n not in cited}
    uncited = [
        {"n": n, "id": h.id, "source": h.source, "chunk": h.index}
        for n, h in enumerate(hits, start=1)
        if n not in cited and n not in unsupported
    ]
    return {
        "cited": [cited[n] for n in sorted(cited)],
        "unsupported": [unsupported[n] for n in sorted(unsupported)],
        "uncited": uncited,
    }


def knowledge_search_tool(retriever: Retriever, method: Method = "hybrid"):
    """The ``knowledge_search(query, k=5)`` tool over an index, for ``lokal run``."""
    from lokal.tools.registry import tool

    def knowledge_search(query: str, k: int = 5) -> list[dict[str, Any]]:
        """Search the indexed documents; returns the best passages with their source.

        Args:
            query: what to look for, in a few words.
            k: how many passages to return (1-10).
        """
        hits = retriever.search(query, k=max(1, min(int(k), 10)), method=method)
        return [
            {"source": f"{h.source}#{h.index}", "text": h.text, "score": round(h.score, 4)}
            for h in hits
        ]

    return tool(knowledge_search, name="knowledge_search")
