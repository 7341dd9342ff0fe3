"""Calibrate the relevance thresholds of memory and RAG on lokal's labelled sets.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/calibrate_thresholds.py [--write]

Three thresholds, each on all-MiniLM-L6-v2 cosines or word overlap (no chat model involved;
about 10 s on 2 cores):

- **notes** (``lokal.memory.store.NOTE_MIN_SCORE``): the cosine of a question to a note.
  ``data/dev/memory_relevance.json`` labels every (question, note) pair relevant or not; the
  threshold maximises F1 over the pairs.
- **RAG relevance** (``lokal.rag.answer.RAG_MIN_SCORE``): the cosine of a question to its
  closest chunk of ``data/docs``. ``data/rag_eval/questions.json`` (answerable) against
  ``data/rag_eval/unanswerable.json`` (not covered by the documents); the threshold is the
  highest that still keeps ``--keep`` (default all) of the answerable questions, placed
  halfway between the lowest kept answerable question and the unanswerable one below it.
- **citation support** (``lokal.rag.answer.CITATION_MIN_OVERLAP``): the share of an answer
  sentence's content words that the cited chunk holds. ``data/rag_eval/answers.json`` gives
  a short right answer per question; it is supported by the chunk that holds the question's
  snippet and not by the other chunks retrieved for it (same topic, the hard case) nor by the
  closest chunk of the next question (an echoed marker). The threshold maximises F1.

A threshold is the midpoint between two neighbouring scores (rounded to 0.01 when that stays
between them). Precision and recall are printed in-sample (on the set the threshold was chosen
on: optimistic) and leave-one-question-out (the threshold refitted without the question it is
then applied to). ``--write`` puts the tables into docs/memory.md and docs/rag.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section  # noqa: E402

from lokal.memory.store import NOTE_MIN_SCORE  # noqa: E402
from lokal.rag.answer import CITATION_MIN_OVERLAP, RAG_MIN_SCORE, support_overlap  # noqa: E402
from lokal.rag.embeddings import CachedEmbedder, LocalEmbedder  # noqa: E402
from lokal.rag.index import Indexer  # noqa: E402
from lokal.rag.retrieval import Retriever  # noqa: E402
from lokal.rag.stores.sqlite_vec import SqliteVecStore  # noqa: E402

Pairs = list[tuple[float, bool]]  # (score, label)


# -- choosing a threshold ------------------------------------------------------------------


def _midpoint(low: float, high: float) -> float:
    middle = (low + high) / 2
    for digits in (2, 3, 4):
        rounded = round(middle, digits)
        if low < rounded <= high:
            return rounded
    return middle


def candidates(scores: list[float]) -> list[float]:
    """Midpoints between neighbouring distinct scores, plus one below all and one above."""
    values = sorted(set(scores))
    inner = [_midpoint(a, b) for a, b in itertools.pairwise(values)]
    return [values[0] - 0.01, *inner, values[-1] + 0.01]


def counts(pairs: Pairs, threshold: float) -> dict[str, int]:
    tp = sum(1 for s, y in pairs if y and s >= threshold)
    fp = sum(1 for s, y in pairs if not y and s >= threshold)
    fn = sum(1 for s, y in pairs if y and s < threshold)
    tn = sum(1 for s, y in pairs if not y and s < threshold)
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn}


def f1(c: dict[str, int]) -> float:
    return 2 * c["tp"] / (2 * c["tp"] + c["fp"] + c["fn"]) if c["tp"] else 0.0


def best_f1(pairs: Pairs) -> float:
    """The threshold with the highest F1 over ``pairs`` (the lowest of equal ones)."""
    options = candidates([s for s, _ in pairs])
    return max(options, key=lambda t: (f1(counts(pairs, t)), -t))


def keep_answerable(pairs: Pairs, keep: float = 1.0) -> float:
    """The highest threshold that keeps at least ``keep`` of the positives (answerable
    questions), halfway between the lowest kept positive and the negative below it."""
    positives = sorted(s for s, y in pairs if y)
    drop = int(np.floor((1.0 - keep) * len(positives) + 1e-9))
    lowest = positives[drop]
    below = [s for s, _ in pairs if s < lowest]
    return _midpoint(max(below), lowest) if below else lowest - 0.01


def leave_one_out(groups: list[Pairs], fit: Callable[[Pairs], float]) -> dict[str, int]:
    """Counts when each group (one question's pairs) is judged by a threshold fitted on the
    other groups."""
    total = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for i, group in enumerate(groups):
        rest = [pair for j, g in enumerate(groups) if j != i for pair in g]
        for key, value in counts(group, fit(rest)).items():
            total[key] += value
    return total


def pr(c: dict[str, int]) -> str:
    precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 1.0
    recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 1.0
    return f"precision {precision:.3f}, recall {recall:.3f}, F1 {f1(c):.3f}"


def sweep_table(pairs: Pairs, thresholds: list[float], what: tuple[str, str]) -> list[str]:
    pos, neg = what
    lines = [
        f"| threshold | {pos} kept | {neg} rejected | precision | recall | F1 |",
        "|---|---|---|---|---|---|",
    ]
    n_pos = sum(1 for _, y in pairs if y)
    n_neg = len(pairs) - n_pos
    for t in thresholds:
        c = counts(pairs, t)
        precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 1.0
        recall = c["tp"] / n_pos
        lines.append(
            f"| {t:g} | {c['tp']}/{n_pos} | {c['tn']}/{n_neg} | {precision:.3f} "
            f"| {recall:.3f} | {f1(c):.3f} |"
        )
    return lines


# -- the three sets --------------------------------------------------------------------------


def notes_calibration(embedder) -> tuple[float, str]:
    data = json.loads((REPO / "data/dev/memory_relevance.json").read_text(encoding="utf-8"))
    notes, questions = data["notes"], data["questions"]
    note_vectors = embedder.embed([n["text"] for n in notes])
    question_vectors = embedder.embed([q["question"] for q in questions])
    similarity = question_vectors @ note_vectors.T
    groups: list[Pairs] = [
        [(float(similarity[i, j]), n["id"] in q["relevant"]) for j, n in enumerate(notes)]
        for i, q in enumerate(questions)
    ]
    pairs = [pair for group in groups for pair in group]
    threshold = best_f1(pairs)
    in_sample, loo = counts(pairs, threshold), leave_one_out(groups, best_f1)

    # the selection as Memory.select makes it (threshold, then at most k=3 notes)
    from lokal.memory.store import Memory

    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(db_path=Path(tmp) / "m.db", memory_dir=tmp, embedder=embedder)
        ids = {memory.add_note(n["text"]): n["id"] for n in notes}
        got_any = got_none = wrong_in = with_relevant = without = 0
        for q in questions:
            picked = {ids[x["id"]] for x in memory.select(q["question"], min_score=threshold)}
            if q["relevant"]:
                with_relevant += 1
                got_any += bool(picked & set(q["relevant"]))
            else:
                without += 1
                got_none += not picked
            wrong_in += bool(picked - set(q["relevant"]))
        memory.close()
    n_pos = sum(1 for _, y in pairs if y)
    lines = [
        f"Calibrated on `data/dev/memory_relevance.json`: {len(notes)} notes x "
        f"{len(questions)} questions = {len(pairs)} (question, note) pairs, {n_pos} relevant; "
        f"{without} questions have no relevant note (among them the issue's \"Summarise the "
        'file report.txt." next to a note about the staging server). Score: cosine of the '
        "question to the note (all-MiniLM-L6-v2). Rule: the threshold with the highest F1 over "
        "the pairs.",
        "",
        f"**Threshold: {threshold:g}** (`NOTE_MIN_SCORE`).",
        "",
        f"- pairs, in-sample: {pr(in_sample)}",
        f"- pairs, leave-one-question-out (threshold refitted without the question): {pr(loo)}",
        f"- as `Memory.select` uses it (k = 3): {got_any}/{with_relevant} questions with a "
        f"relevant note get it; {got_none}/{without} questions without one get no note; "
        f"{wrong_in}/{len(questions)} questions get at least one irrelevant note",
        "",
        *sweep_table(
            pairs,
            sorted({0.3, 0.35, threshold, 0.45, 0.5, 0.6}),
            ("relevant pairs", "irrelevant pairs"),
        ),
    ]
    return threshold, "\n".join(lines)


def _index(tmp: Path, embedder) -> tuple[SqliteVecStore, Retriever]:
    store = SqliteVecStore(tmp / "eval.db")
    Indexer(store, embedder).index_path(REPO / "data" / "docs")
    return store, Retriever(store, embedder)


def rag_calibration(retriever: Retriever, store: SqliteVecStore, keep: float) -> tuple[float, str]:
    answerable = json.loads((REPO / "data/rag_eval/questions.json").read_text(encoding="utf-8"))
    unanswerable = json.loads(
        (REPO / "data/rag_eval/unanswerable.json").read_text(encoding="utf-8")
    )
    groups: list[Pairs] = [[(retriever.best_cosine(q["question"]), True)] for q in answerable]
    groups += [[(retriever.best_cosine(q["question"]), False)] for q in unanswerable]
    pairs = [group[0] for group in groups]
    threshold = keep_answerable(pairs, keep)
    c = counts(pairs, threshold)
    loo = leave_one_out(groups, lambda rest: keep_answerable(rest, keep))
    scored = list(zip(pairs[len(answerable) :], unanswerable, strict=True))
    near = [s for (s, _), q in scored if q["kind"] == "near"]
    off = [s for (s, _), q in scored if q["kind"] != "near"]
    lines = [
        f"Calibrated on `data/rag_eval/questions.json` ({len(answerable)} answerable questions) "
        f"and `data/rag_eval/unanswerable.json` ({len(unanswerable)} questions the documents "
        f"do not answer: {len(near)} on their topics, e.g. SQLite's default page size, and "
        f"{len(off)} off-topic), over the {store.count()} chunks of `data/docs` (200/40 word "
        "pieces). Score: cosine of the question to its closest chunk (all-MiniLM-L6-v2). Rule: "
        f"the highest threshold that keeps {keep:.0%} of the answerable questions, halfway "
        "between the lowest of them and the unanswerable question just below it.",
        "",
        f"**Threshold: {threshold:g}** (`RAG_MIN_SCORE`).",
        "",
        f"- answerable questions kept: {c['tp']}/{len(answerable)}; unanswerable rejected "
        f"without asking the model: {c['tn']}/{len(unanswerable)} (off-topic "
        f"{sum(s < threshold for s in off)}/{len(off)}, on-topic "
        f"{sum(s < threshold for s in near)}/{len(near)})",
        f"- leave-one-question-out: answerable kept {loo['tp']}/{len(answerable)}, unanswerable "
        f"rejected {loo['tn']}/{len(unanswerable)}",
        f"- scores: answerable {min(s for s, y in pairs if y):.3f}–"
        f"{max(s for s, y in pairs if y):.3f}, unanswerable off-topic {min(off):.3f}–"
        f"{max(off):.3f}, on-topic {min(near):.3f}–{max(near):.3f}",
        "",
        *sweep_table(
            pairs,
            sorted({0.25, threshold, 0.35, 0.4, 0.45, 0.5}),
            ("answerable", "unanswerable"),
        ),
    ]
    return threshold, "\n".join(lines)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def citation_calibration(retriever: Retriever, store: SqliteVecStore) -> tuple[float, str]:
    questions = json.loads((REPO / "data/rag_eval/questions.json").read_text(encoding="utf-8"))
    answers = json.loads((REPO / "data/rag_eval/answers.json").read_text(encoding="utf-8"))
    chunks = store.chunks()
    groups: list[Pairs] = []
    for i, (q, a) in enumerate(zip(questions, answers, strict=True)):
        assert q["question"] == a["question"], a["question"]

        def right(hit, q=q):
            return hit.source == q["source"] and _norm(q["snippet"]) in _norm(hit.text)

        group = [(max(support_overlap(a["answer"], h.text) for h in chunks if right(h)), True)]
        for hit in retriever.search(q["question"], k=4):
            if not right(hit):
                group.append((support_overlap(a["answer"], hit.text), False))
        other = questions[(i + 1) % len(questions)]
        echoed = retriever.search(other["question"], k=1)[0]
        if not right(echoed):
            group.append((support_overlap(a["answer"], echoed.text), False))
        groups.append(group)
    pairs = [pair for group in groups for pair in group]
    threshold = best_f1(pairs)
    c, loo = counts(pairs, threshold), leave_one_out(groups, best_f1)
    n_neg = sum(1 for _, y in pairs if not y)
    lines = [
        f"Calibrated on `data/rag_eval/answers.json`: a short right answer to each of the "
        f"{len(answers)} questions, paired with the chunk holding the question's snippet "
        f"(supported) and with {n_neg} chunks that do not hold it (the other chunks retrieved "
        "for the question, and the closest chunk of the next question: an echoed marker). "
        "Score: the share of the answer's content words (lower-cased letters and digits, stop "
        "words dropped, cut to 5 letters) that the chunk holds. Rule: the threshold with the "
        "highest F1.",
        "",
        f"**Threshold: {threshold:g}** (`CITATION_MIN_OVERLAP`).",
        "",
        f"- in-sample: supported kept {c['tp']}/{c['tp'] + c['fn']}, unsupported rejected "
        f"{c['tn']}/{n_neg}; {pr(c)}",
        f"- leave-one-question-out: {pr(loo)}",
        f"- scores: supported {min(s for s, y in pairs if y):.3f}–"
        f"{max(s for s, y in pairs if y):.3f}, unsupported {min(s for s, y in pairs if not y):.3f}–"
        f"{max(s for s, y in pairs if not y):.3f}",
        "",
        *sweep_table(
            pairs,
            sorted({0.4, 0.5, threshold, 0.7, 0.8}),
            ("supported", "unsupported"),
        ),
    ]
    return threshold, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=float, default=1.0, help="answerable questions to keep")
    parser.add_argument("--write", action="store_true", help="update docs/memory.md, rag.md")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        embedder = CachedEmbedder(LocalEmbedder(), Path(tmp) / "cache.db")
        note_threshold, notes_md = notes_calibration(embedder)
        store, retriever = _index(Path(tmp), embedder)
        try:
            rag_threshold, rag_md = rag_calibration(retriever, store, args.keep)
            cite_threshold, cite_md = citation_calibration(retriever, store)
        finally:
            store.close()
            embedder.close()

    print("## Notes\n\n" + notes_md + "\n")
    print("## RAG relevance\n\n" + rag_md + "\n")
    print("## Citation support\n\n" + cite_md + "\n")
    reproduce = (
        "\n\nReproduce: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/calibrate_thresholds.py`."
    )
    if args.write:
        write_section("note_threshold", notes_md + reproduce, REPO / "docs" / "memory.md")
        write_section("rag_threshold", rag_md + reproduce, REPO / "docs" / "rag.md")
        write_section("citation_threshold", cite_md + reproduce, REPO / "docs" / "rag.md")
    in_code = {
        "NOTE_MIN_SCORE": (NOTE_MIN_SCORE, note_threshold),
        "RAG_MIN_SCORE": (RAG_MIN_SCORE, rag_threshold),
        "CITATION_MIN_OVERLAP": (CITATION_MIN_OVERLAP, cite_threshold),
    }
    for name, (used, fitted) in in_code.items():
        if abs(used - fitted) > 1e-9:
            print(f"note: the code uses {name} = {used}; this calibration gives {fitted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
