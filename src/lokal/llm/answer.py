"""Answer a question from retrieved passages with the model, citations checked.

The retrieval side (passages, thresholds, citation support) lives in ``lokal.rag.answer``;
this module adds the model's answer on top, so ``lokal.rag`` never imports the decision engine.
"""

from __future__ import annotations

from typing import Any

from lokal.config import Profile
from lokal.llm.decide import generate_ai_message
from lokal.rag.answer import (
    CITATION_MIN_OVERLAP,
    NOT_FOUND,
    RAG_MIN_SCORE,
    build_rag_messages,
    citation_record,
    citation_support,
)
from lokal.rag.retrieval import Method, Retriever

__all__ = ["answer_question"]


def _not_found(record: dict[str, Any], reason: str) -> dict[str, Any]:
    return {
        **record,
        "status": "no_context",
        "reason": reason,
        "answer": NOT_FOUND,
        "raw_answer": "",
        "citations": [],
        "cited": [],
        "unsupported": [],
        "uncited": [
            {"n": c["n"], "id": c["id"], "source": c["source"], "chunk": c["chunk"]}
            for c in record["context"]
        ],
        "cited_by_model": False,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
    }


def answer_question(
    question: str,
    retriever: Retriever,
    profile: Profile,
    *,
    k: int = 4,
    method: Method = "hybrid",
    backend: Any = None,
    min_score: float | None = RAG_MIN_SCORE,
    min_overlap: float = CITATION_MIN_OVERLAP,
) -> dict[str, Any]:
    """The answer record: ``answer`` (with a ``Sources:`` list), ``citations`` (the passages
    that support the answer, each ``{n, id: "source#chunk", source, chunk, heading, score,
    text, overlap, by}``), ``cited`` / ``unsupported`` / ``uncited`` (which passages the answer
    cites with support, cites without support, or leaves out; see ``citation_support``),
    ``cited_by_model`` (the model's own ``[n]`` markers point at supporting passages),
    ``relevance`` (the question's cosine to the closest chunk, and the threshold),
    ``context``, ``usage`` and ``status``.

    Below ``min_score`` (None or 0: no threshold) the answer is ``NOT_FOUND`` without asking
    the model (``status: no_context``)."""
    hits = retriever.search(question, k=k, method=method)
    best = retriever.best_cosine(question) if hits else 0.0
    record: dict[str, Any] = {
        "question": question,
        "method": method,
        "relevance": {"best_cosine": round(best, 4), "min_score": min_score or 0.0},
        "context": [citation_record(n, h) for n, h in enumerate(hits, start=1)],
    }
    if not hits:
        return _not_found(record, "nothing was retrieved")
    if min_score and best < min_score:
        reason = (
            f"the closest passage has cosine similarity {best:.3f} to the question, "
            f"below the threshold {min_score}: the documents do not cover it"
        )
        return _not_found(record, reason)
    # an answer from passages is prose with [n] markers, not a tool decision: free decoding
    prose = profile.with_tool_calling(mode="prompt_json")
    result = generate_ai_message(
        prose, build_rag_messages(question, hits), [], backend=backend, purpose="final"
    )
    text = (result.ai_message or {}).get("content") or "" if result.ok else ""
    says_not_found = NOT_FOUND.lower().rstrip(".") in text.lower()
    if says_not_found or not text.strip():
        support = citation_support("", hits, min_overlap)
    else:
        support = citation_support(text, hits, min_overlap)
    by_n = {c["n"]: c for c in support["cited"]}
    citations = [
        {**record["context"][n - 1], "overlap": c["overlap"], "by": c["by"]}
        for n, c in by_n.items()
    ]
    lines = [f"[{c['n']}] {c['id']}" for c in citations]
    shown = text.strip() or NOT_FOUND
    if lines:
        shown += "\n\nSources:\n" + "\n".join(lines)
    if support["unsupported"]:
        shown += "\n\nCited, but the passage does not support it: " + ", ".join(
            f"[{c['n']}] {c['id']}" for c in support["unsupported"]
        )
    return {
        **record,
        "status": result.status,
        "answer": shown,
        "raw_answer": text,
        "citations": citations,
        **support,
        "cited_by_model": any(c["by"] == "model" for c in support["cited"]),
        "usage": result.usage.to_dict(),
        "latency_ms": result.latency_ms,
        "error": result.error.to_dict() if result.error else None,
    }
