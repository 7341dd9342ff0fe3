"""Memory for the agent: global memory, selected memory, and saving.

- **global memory**: the markdown files of a memory directory (``$LOKAL_HOME/memory/*.md`` by
  default), always given to the model as one system message, capped at ``max_global_chars``;
- **selected memory**: notes (saved by the ``remember`` tool or as run summaries) relevant to
  the question: those whose embedding cosine to the question reaches ``NOTE_MIN_SCORE``
  (calibrated on ``data/dev/memory_relevance.json``, see docs/memory.md; none when none
  does), at most ``k``, ordered hybrid — BM25 and cosine rankings fused by reciprocal rank —
  and given with their source. ``last_selection`` keeps the scores (the runtime puts them in
  the trace as a ``memory`` event). The embedding model is loaded only when there are notes;
- **saving**: ``remember(note)`` stores a note; with ``summarize=True`` an extractive summary
  of each run that ended with the model's own answer (``status: final``) is stored as a note
  too, its source marked ``model-written`` (the prompt says such notes may be wrong).

``Memory`` is the runtime's ``MemoryHook``; ``Memory.attach(agent)`` also records the run step
by step in the conversation store (see ``lokal.memory.conversations``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from lokal.llm.checks import GLOBAL_HEADING, NOTES_HEADING
from lokal.memory.conversations import ConversationRecorder, ConversationStore
from lokal.paths import embedding_cache_path
from lokal.paths import memory_dir as default_memory_dir

__all__ = [
    "MODEL_WRITTEN",
    "NOTE_MIN_SCORE",
    "Memory",
    "Note",
    "extractive_summary",
    "is_model_written",
    "remember_tool",
]

# Calibrated on data/dev/memory_relevance.json (20 notes x 46 questions, all-MiniLM-L6-v2) by
# benchmarks/calibrate_thresholds.py: the cosine that maximises F1 over (question, note) pairs.
NOTE_MIN_SCORE = 0.40
MODEL_WRITTEN = "model-written"  # the source of a note the model wrote (a run summary)


class Note(dict):
    """``{id, text, source, created, score}``."""


class Memory:
    def __init__(
        self,
        *,
        memory_dir: str | Path | None = None,
        db_path: str | Path | None = None,
        conversation: str | None = None,
        embedder: Any = None,
        k: int = 3,
        max_global_chars: int = 4000,
        summarize: bool = False,
        min_score: float | None = NOTE_MIN_SCORE,
    ) -> None:
        self.memory_dir = Path(memory_dir) if memory_dir else default_memory_dir()
        self.store = ConversationStore(db_path)
        self.conversation = conversation
        self.k = k
        self.max_global_chars = max_global_chars
        self.summarize = summarize
        self.min_score = min_score
        self.last_selection: dict[str, Any] | None = None
        self._embedder = embedder
        self._load_seconds: float | None = None
        self.recorder: ConversationRecorder | None = None

    # -- global memory ---------------------------------------------------------------------

    def global_documents(self) -> list[Path]:
        if not self.memory_dir.is_dir():
            return []
        return sorted(self.memory_dir.glob("*.md"))

    def global_text(self) -> str:
        parts = [
            f"## {path.name}\n{path.read_text(encoding='utf-8').strip()}"
            for path in self.global_documents()
        ]
        text = "\n\n".join(p for p in parts if p.strip())
        if len(text) > self.max_global_chars:
            text = text[: self.max_global_chars].rstrip() + "\n[… global memory truncated]"
        return text

    # -- notes -----------------------------------------------------------------------------

    def add_note(self, text: str, source: str = "user") -> int:
        text = text.strip()
        if not text:
            raise ValueError("a note cannot be empty")
        return self.store._write(
            lambda conn: (
                conn.execute(
                    "INSERT INTO notes (text, source, created) VALUES (?, ?, ?)",
                    (text, source, time.time()),
                ).lastrowid
            )
        )

    def delete_note(self, note_id: int) -> bool:
        """Delete note ``note_id``; whether there was one."""
        return bool(
            self.store._write(
                lambda conn: conn.execute("DELETE FROM notes WHERE id=?", (note_id,)).rowcount
            )
        )

    def notes(self) -> list[Note]:
        rows = self.store.conn.execute("SELECT * FROM notes ORDER BY id").fetchall()
        return [Note(dict(row)) for row in rows]

    def take_load_seconds(self) -> float | None:
        """The seconds the embedding model took to load for the last ``load`` (its first
        notes ranked included), once; None when nothing was loaded."""
        seconds, self._load_seconds = self._load_seconds, None
        return seconds

    def embedder(self):
        if self._embedder is None:
            from lokal.rag.embeddings import CachedEmbedder, LocalEmbedder

            self._embedder = CachedEmbedder(LocalEmbedder(), embedding_cache_path())
        return self._embedder

    def select(
        self, question: str, k: int | None = None, min_score: float | None = None
    ) -> list[Note]:
        """The notes relevant to ``question``: those whose cosine similarity to it reaches
        ``min_score`` (default ``self.min_score``; None or 0: no threshold), at most ``k``,
        ordered by BM25 and cosine rankings fused by RRF. Each note carries ``score`` (fused),
        ``cosine`` and ``bm25``. An empty list when no note is relevant; the report (selected
        and best rejected notes, with scores) is kept in ``last_selection``."""
        from lokal.rag.retrieval import BM25Index, rrf

        k = self.k if k is None else k
        threshold = self.min_score if min_score is None else min_score
        notes = self.notes()
        report: dict[str, Any] = {
            "notes": len(notes),
            "k": k,
            "min_score": threshold or 0.0,
            "selected": [],
            "rejected": [],
        }
        self.last_selection = report
        if not notes or k <= 0:
            return []
        found = BM25Index(notes, [x["text"] for x in notes]).search(question, len(notes))
        bm25 = {note["id"]: score for note, score in found}
        # the embedding model loads here, only when there are notes to rank; the run reports
        # that load as a step of its own (take_load_seconds)
        first = self._embedder is None
        started = time.perf_counter()
        vectors = self.embedder().embed([question] + [x["text"] for x in notes])
        if first:
            self._load_seconds = round(time.perf_counter() - started, 4)
        similarity = vectors[1:] @ vectors[0]
        cosines = {note["id"]: float(c) for note, c in zip(notes, similarity, strict=True)}
        relevant = [x for x in notes if not threshold or cosines[x["id"]] >= threshold]
        dense = sorted(relevant, key=lambda x: -cosines[x["id"]])
        keyword = [x for x in relevant if bm25.get(x["id"], 0.0) > 0]
        keyword.sort(key=lambda x: -bm25[x["id"]])
        fused = rrf([dense, keyword], key=lambda note: note["id"])[:k]
        selected = [
            Note(
                {
                    **note,
                    "score": round(score, 5),
                    "cosine": round(cosines[note["id"]], 4),
                    "bm25": round(bm25.get(note["id"], 0.0), 4),
                }
            )
            for note, score in fused
        ]
        chosen = {note["id"] for note in selected}
        rejected = sorted(
            (x for x in notes if x["id"] not in chosen), key=lambda x: -cosines[x["id"]]
        )[:k]
        report["selected"] = [_scores(note) for note in selected]
        report["rejected"] = [
            _scores({**x, "cosine": round(cosines[x["id"]], 4), "bm25": bm25.get(x["id"], 0.0)})
            for x in rejected
        ]
        return selected

    # -- MemoryHook ------------------------------------------------------------------------

    def load(self, question: str) -> list[dict[str, Any]]:
        parts = []
        text = self.global_text()
        if text:
            parts.append(GLOBAL_HEADING + "\n" + text)
        selected = self.select(question)
        if self.last_selection is not None:
            self.last_selection["global_chars"] = len(text)
        if selected:
            lines = []
            for note in selected:
                source = note["source"]
                if is_model_written(note):
                    source += "; written by the model, may be wrong"
                lines.append(f"- {note['text']} (source: {source})")
            parts.append(NOTES_HEADING + "\n" + "\n".join(lines))
        return [{"role": "system", "content": "\n\n".join(parts)}] if parts else []

    def save(self, result: Any) -> None:
        """With ``summarize``: store a summary of a run that ended with the model's own
        answer (``status: final``) as a note marked model-written. A run stopped by a guard
        (time budget, repeated call, …) ended without such an answer: nothing is stored."""
        if not self.summarize or result.status != "final":
            return
        summary = extractive_summary(result)
        run_id = self.recorder.run_id if self.recorder else None
        label = f"{MODEL_WRITTEN} summary of run {run_id}" if run_id else f"{MODEL_WRITTEN} summary"
        if self.conversation:
            label += f" in {self.conversation}"
        self.add_note(summary, source=label)
        if run_id is not None:
            self.store.set_summary(run_id, summary)

    # -- wiring ----------------------------------------------------------------------------

    def history(self) -> list[dict[str, Any]]:
        return self.store.history(self.conversation) if self.conversation else []

    def attach(self, agent: Any, conversation: str | None = None) -> Memory:
        """Make this the agent's memory, and record its runs in ``conversation``."""
        self.conversation = conversation or self.conversation or _fresh_name()
        agent.memory = self
        if "remember" not in agent.registry:
            agent.registry.register(remember_tool(self))
        self.recorder = ConversationRecorder(self.store, self.conversation).attach(agent)
        return self

    def close(self) -> None:
        self.store.close()


def is_model_written(note: dict[str, Any]) -> bool:
    """Whether the model wrote this note (a run summary), rather than the user or the
    ``remember`` tool on the user's request."""
    return str(note.get("source") or "").startswith(MODEL_WRITTEN)


def _scores(note: dict[str, Any]) -> dict[str, Any]:
    """A note as the ``memory`` trace event shows it."""
    text = note["text"]
    return {
        "id": note["id"],
        "source": note["source"],
        "text": text if len(text) <= 200 else text[:199] + "…",
        "cosine": note["cosine"],
        "bm25": round(float(note["bm25"]), 4),
        **({"score": note["score"]} if "score" in note else {}),
        "model_written": is_model_written(note),
    }


def _fresh_name() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-") + f"{time.time_ns() % 100000:05d}"


def remember_tool(memory: Memory):
    from lokal.tools.registry import tool

    def remember(note: str) -> dict[str, Any]:
        """Save a short note to long-term memory, to be recalled in later conversations.

        Args:
            note: the fact to remember, in one sentence.
        """
        source = f"remember in {memory.conversation}" if memory.conversation else "remember"
        return {"saved": True, "id": memory.add_note(note, source=source)}

    return tool(remember, name="remember")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text or "") if s.strip()]


def extractive_summary(result: Any, max_chars: int = 400) -> str:
    """The question, the answer's first sentences and the tools used (no model call)."""
    tools = []
    for message in result.messages:
        for call in message.get("tool_calls") or []:
            if call["name"] not in tools:
                tools.append(call["name"])
    answer = " ".join(_sentences(result.answer)[:2])
    text = f"Asked: {result.question.strip()} Answer: {answer}"
    if tools:
        text += f" Tools used: {', '.join(tools)}."
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
