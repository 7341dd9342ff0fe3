"""Calibrate the extraction threshold of ``rag ask`` (``lokal.llm.answer.EXTRACT_MIN_SCORE``).

    .venv/bin/python benchmarks/calibrate_extraction.py [--limit N]

When the model does not answer from passages that passed the relevance threshold (it writes
"not available", or its reply fails the answer checks), ``rag ask`` answers with the sentence
of the retrieved passages closest to the question, if that sentence's cosine to the question
reaches ``EXTRACT_MIN_SCORE``; below it, the documents are taken not to hold the answer.

For every question of ``data/rag_eval/questions.json`` (answerable) and
``data/rag_eval/unanswerable.json`` the script retrieves 4 passages of ``data/docs`` as
``rag ask`` does, finds the closest sentence (all-MiniLM-L6-v2), and prints its cosine, whether
it holds the labelled snippet, and the threshold: halfway between the lowest answerable
question and the unanswerable one just below it (in-sample: the set it is chosen on). No chat
model is involved; about 20 s on 2 cores. ``--limit N``: the first N questions of each file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from lokal.llm.answer import EXTRACT_MIN_SCORE  # noqa: E402
from lokal.rag.answer import RAG_MIN_SCORE  # noqa: E402
from lokal.rag.embeddings import CachedEmbedder, LocalEmbedder  # noqa: E402
from lokal.rag.index import Indexer  # noqa: E402
from lokal.rag.retrieval import Retriever  # noqa: E402
from lokal.rag.stores.sqlite_vec import SqliteVecStore  # noqa: E402

SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="questions per file")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    store = SqliteVecStore(tmp / "index.db")
    embedder = CachedEmbedder(LocalEmbedder(), tmp / "cache.db")
    Indexer(store, embedder).index_path(REPO / "data" / "docs")
    retriever = Retriever(store, embedder)

    def closest(question: str) -> tuple[float, float, str]:
        hits = retriever.search(question, k=4, method="hybrid")
        sentences = [
            " ".join(s.split())
            for h in hits
            for s in SENTENCES.split(h.text)
            if len(s.strip()) > 12
        ]
        vectors = np.asarray(embedder.embed([question, *sentences]))
        cosines = vectors[1:] @ vectors[0]
        best = int(np.argmax(cosines))
        return retriever.best_cosine(question), float(cosines[best]), sentences[best]

    rows = []
    for kind, path in (("answerable", "questions.json"), ("unanswerable", "unanswerable.json")):
        items = json.loads((REPO / "data" / "rag_eval" / path).read_text(encoding="utf-8"))
        for item in items[: args.limit]:
            relevance, score, sentence = closest(item["question"])
            holds = (
                item.get("snippet", "").lower() in sentence.lower() if "snippet" in item else None
            )
            rows.append((kind, relevance, score, holds))
    answerable = sorted(s for k, r, s, _ in rows if k == "answerable")
    below = [s for k, r, s, _ in rows if k == "unanswerable" and s < answerable[0]]
    threshold = (answerable[0] + max(below)) / 2 if below else answerable[0]
    passed = [(k, s) for k, r, s, _ in rows if r >= RAG_MIN_SCORE]
    print(
        f"questions: {sum(k == 'answerable' for k, *_ in rows)} answerable, "
        f"{sum(k == 'unanswerable' for k, *_ in rows)} unanswerable"
    )
    print(
        f"closest sentence holds the snippet: "
        f"{sum(bool(h) for k, r, s, h in rows if k == 'answerable')} of {len(answerable)}"
    )
    print(f"fitted threshold: {threshold:.3f} (in use: {EXTRACT_MIN_SCORE})")
    for kind in ("answerable", "unanswerable"):
        over_relevance = [s for k, s in passed if k == kind]
        kept = sum(s >= EXTRACT_MIN_SCORE for s in over_relevance)
        print(
            f"{kind}: {len(over_relevance)} pass the relevance threshold {RAG_MIN_SCORE}, "
            f"{kept} of them reach the extraction threshold {EXTRACT_MIN_SCORE}"
        )


if __name__ == "__main__":
    main()
