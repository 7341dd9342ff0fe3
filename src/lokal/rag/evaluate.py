"""Retrieval evaluation: hit@1, hit@5 and MRR of vector, BM25 and hybrid retrieval over a
labelled question set (``data/rag_eval/questions.json``: question, source, snippet).

A retrieved chunk is right when it comes from the question's source file and contains the
snippet (case and whitespace ignored). MRR is computed over the top 10.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from lokal.rag.index import Indexer
from lokal.rag.retrieval import Retriever
from lokal.rag.stores.sqlite_vec import SqliteVecStore

__all__ = ["evaluate", "markdown_table"]

METHODS = ("vector", "bm25", "hybrid")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def evaluate(
    questions: str | Path | list[dict[str, Any]],
    docs: str | Path,
    embedder: Any,
    *,
    depth: int = 10,
    max_tokens: int = 200,
    overlap: int = 40,
) -> dict[str, Any]:
    """Index ``docs`` into a temporary SQLite store and score every method."""
    items = (
        json.loads(Path(questions).read_text(encoding="utf-8"))
        if not isinstance(questions, list)
        else questions
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteVecStore(Path(tmp) / "eval.db")
        try:
            Indexer(store, embedder, max_tokens=max_tokens, overlap=overlap).index_path(docs)
            retriever = Retriever(store, embedder)
            results: dict[str, Any] = {
                "questions": len(items),
                "chunks": store.count(),
                "methods": {},
            }
            embedder.embed([item["question"] for item in items])  # one batch, then cached
            for method in METHODS:
                hits1 = hits5 = 0
                rr = 0.0
                started = time.perf_counter()
                misses = []
                for item in items:
                    found = retriever.search(item["question"], k=depth, method=method)
                    rank = next(
                        (
                            i
                            for i, hit in enumerate(found, start=1)
                            if hit.source == item["source"]
                            and _norm(item["snippet"]) in _norm(hit.text)
                        ),
                        None,
                    )
                    hits1 += rank == 1
                    hits5 += rank is not None and rank <= 5
                    rr += 1.0 / rank if rank else 0.0
                    if rank is None or rank > 5:
                        misses.append(item["question"])
                n = max(1, len(items))
                results["methods"][method] = {
                    "hit@1": round(hits1 / n, 3),
                    "hit@5": round(hits5 / n, 3),
                    "mrr": round(rr / n, 3),
                    "ms_per_query": round((time.perf_counter() - started) * 1000 / n, 1),
                    "missed@5": misses,
                }
        finally:
            store.close()
    return results


def markdown_table(results: dict[str, Any]) -> str:
    lines = [
        f"{results['questions']} questions, {results['chunks']} chunks "
        "(200/40 word pieces, all-MiniLM-L6-v2).",
        "",
        "| method | hit@1 | hit@5 | MRR | ms/query (question embedded beforehand) |",
        "|---|---|---|---|---|",
    ]
    for method, row in results["methods"].items():
        lines.append(
            f"| {method} | {row['hit@1']:.3f} | {row['hit@5']:.3f} | {row['mrr']:.3f} "
            f"| {row['ms_per_query']} |"
        )
    return "\n".join(lines)
