"""A RAG answer: retrieve, put the numbered passages in the prompt, answer only from them,
cite them as [1], [2] (mapped to ``source#chunk``)."""

from __future__ import annotations

import re
from typing import Any

from lokal.rag.retrieval import Method, Retriever
from lokal.rag.stores import Hit

__all__ = ["NOT_FOUND", "answer_question", "build_rag_messages", "knowledge_search_tool"]

NOT_FOUND = "The documents do not contain this information."

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


def _citation(n: int, hit: Hit) -> dict[str, Any]:
    return {
        "n": n,
        "id": hit.id,
        "source": hit.source,
        "chunk": hit.index,
        "heading": hit.heading,
        "score": round(float(hit.score), 6),
        "text": hit.text,
    }


def answer_question(
    question: str,
    retriever: Retriever,
    profile: Any,
    *,
    k: int = 4,
    method: Method = "hybrid",
    backend: Any = None,
) -> dict[str, Any]:
    """The answer record: ``answer`` (with a ``Sources:`` list), ``citations`` (each
    ``{n, id: "source#chunk", source, chunk, heading, score, text}``), ``cited_by_model``
    (whether the model wrote the [n] markers itself), ``context``, ``usage`` and ``status``."""
    from lokal.llm.decide import generate_ai_message

    hits = retriever.search(question, k=k, method=method)
    record: dict[str, Any] = {
        "question": question,
        "method": method,
        "context": [_citation(n, h) for n, h in enumerate(hits, start=1)],
    }
    if not hits:
        return {
            **record,
            "status": "no_context",
            "answer": NOT_FOUND,
            "raw_answer": "",
            "citations": [],
            "cited_by_model": False,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        }
    # an answer from passages is prose with [n] markers, not a tool decision: free decoding
    prose = (
        profile.with_tool_calling(mode="prompt_json")
        if hasattr(profile, "with_tool_calling")
        else profile
    )
    result = generate_ai_message(
        prose, build_rag_messages(question, hits), [], backend=backend, purpose="final"
    )
    text = (result["ai_message"] or {}).get("content") or "" if result["ai_message"] else ""
    if result["status"] != "success":
        text = ""
    numbers = sorted({int(n) for n in re.findall(r"\[(\d+)\]", text) if 1 <= int(n) <= len(hits)})
    cited_by_model = bool(numbers)
    if NOT_FOUND.lower().rstrip(".") in text.lower() and not numbers:
        citations: list[dict[str, Any]] = []
    else:
        # a model that cites nothing is shown the passages it was given, marked as such
        numbers = numbers or list(range(1, len(hits) + 1))
        citations = [record["context"][n - 1] for n in numbers]
    sources = "\n".join(f"[{c['n']}] {c['id']}" for c in citations)
    shown = (text.strip() or NOT_FOUND) + (f"\n\nSources:\n{sources}" if sources else "")
    return {
        **record,
        "status": result["status"],
        "answer": shown,
        "raw_answer": text,
        "citations": citations,
        "cited_by_model": cited_by_model,
        "usage": result["usage"],
        "latency_ms": result["latency_ms"],
        "error": result["error"],
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
