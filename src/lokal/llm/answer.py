"""Answer a question from retrieved passages with the model, citations checked.

The retrieval side (passages, thresholds, citation support) lives in ``lokal.rag.answer``;
this module adds the model's answer on top, so ``lokal.rag`` never imports the decision engine.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from lokal.config import Profile
from lokal.errors import BackendError
from lokal.llm.backends import Backend
from lokal.llm.checks import AnswerContext, check_answer
from lokal.llm.decide import generate_ai_message
from lokal.llm.evidence import Passage
from lokal.llm.extract import CANDIDATES, choose_passage
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


# the ways a small model says the documents do not hold the answer ("The document is not
# available.", "I don't know"), besides the exact NOT_FOUND sentence it is asked to write
_NOT_FOUND_SAID = re.compile(
    r"\b(?:not (?:available|mentioned|provided|found|given|stated|specified)|"
    r"(?:does|do) not (?:contain|say|mention|provide|include)|no (?:information|mention)|"
    r"(?:cannot|can't|could not|couldn't) (?:find|answer|determine)|"
    r"(?:don't|do not) know)\b",
    re.IGNORECASE,
)


def _extract_sentence(
    question: str, hits: list[Any], retriever: Retriever, backend: Backend, profile: Profile
) -> str | None:
    """The sentence of the retrieved passages that answers ``question``, with its ``[n]``
    marker: the sentences whose cosine to the question reaches ``EXTRACT_MIN_SCORE`` (by the
    retriever's embedding model) are the candidates, the closest few of them go to the chat
    model, whose likelihood picks one. None when no sentence is that close."""
    passages = []
    for n, hit in enumerate(hits, start=1):
        for sentence in _SENTENCES.split(hit.text):
            sentence = " ".join(sentence.split()).strip(" -*#|>")
            if len(sentence) > 12:
                passages.append(Passage(sentence, f"[{n}]", hit.id))
    if not passages:
        return None
    vectors = np.asarray(retriever.embedder.embed([question, *(p.text for p in passages)]))
    cosines = vectors[1:] @ vectors[0]
    order = [int(i) for i in np.argsort(-cosines, kind="stable") if cosines[i] >= EXTRACT_MIN_SCORE]
    if not order:
        return None
    close = [passages[i] for i in order[:CANDIDATES]]
    try:
        chosen = choose_passage(
            question, close, backend=backend, settings=profile.generation, k=len(close)
        )
    except BackendError:
        chosen = None
    passage = chosen.passage if chosen is not None else close[0]
    return f"{passage.text} {passage.tool}"


# the cosine (all-MiniLM-L6-v2) of the question to the sentence extracted when the model
# does not answer from relevant passages; below it the documents are taken not to hold the
# answer. Calibrated by benchmarks/calibrate_extraction.py on data/rag_eval (docs/rag.md).
EXTRACT_MIN_SCORE = 0.5
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")


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
    backend: Backend = None,
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
    checked, findings = check_answer(
        text, AnswerContext(question=question, sources=[h.text for h in hits])
    )
    retry = [f for f in findings if f.action == "retry"]
    text = "" if retry else checked
    says_not_found = not text.strip() or bool(_NOT_FOUND_SAID.search(text))
    source = "model"
    if says_not_found:
        # the passages are relevant (above the threshold), yet the model did not answer
        # from them: the sentence of theirs closest to the question is the answer
        extracted = _extract_sentence(question, hits, retriever, backend, profile)
        if extracted is not None:
            text, source = extracted, "extracted"
            says_not_found = False
    if says_not_found:
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
    answered = not says_not_found and bool(citations)
    if source == "extracted":
        status = "extracted"
    elif answered:
        status = "success"
    else:  # the same outcome as the exit code: no answer the documents support
        status = "not_found" if says_not_found else "unsupported"
    return {
        **record,
        "status": status,
        "answer_source": source if not says_not_found else "none",
        "checks": [f.to_dict() for f in findings],
        "decision_status": result.status,
        "answer": shown,
        "raw_answer": text,
        "citations": citations,
        **support,
        "cited_by_model": any(c["by"] == "model" for c in support["cited"]),
        "usage": result.usage.to_dict(),
        "latency_ms": result.latency_ms,
        "error": result.error.to_dict() if result.error else None,
    }
