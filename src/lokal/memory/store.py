"""Memory for the agent (B5): global memory, selected memory, and saving.

- **global memory**: the markdown files of a memory directory (``$LOKAL_HOME/memory/*.md`` by
  default), always given to the model as one system message, capped at ``max_global_chars``;
- **selected memory**: notes (saved by the ``remember`` tool or as run summaries) relevant to
  the question, retrieved hybrid — BM25 and embedding cosine, fused by reciprocal rank — and
  given with their source;
- **saving**: ``remember(note)`` stores a note; with ``summarize=True`` an extractive summary
  of each run is stored as a note too.

``Memory`` is the runtime's ``MemoryHook``; ``Memory.attach(agent)`` also records the run step
by step in the conversation store (see ``lokal.memory.conversations``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from lokal.memory.conversations import ConversationRecorder, ConversationStore
from lokal.memory.db import lokal_home

__all__ = ["Memory", "Note", "extractive_summary", "remember_tool"]


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
    ) -> None:
        self.memory_dir = Path(memory_dir) if memory_dir else lokal_home() / "memory"
        self.store = ConversationStore(db_path)
        self.conversation = conversation
        self.k = k
        self.max_global_chars = max_global_chars
        self.summarize = summarize
        self._embedder = embedder
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

    def notes(self) -> list[Note]:
        rows = self.store.conn.execute("SELECT * FROM notes ORDER BY id").fetchall()
        return [Note(dict(row)) for row in rows]

    def embedder(self):
        if self._embedder is None:
            from lokal.rag.embeddings import CachedEmbedder, LocalEmbedder

            self._embedder = CachedEmbedder(LocalEmbedder(), lokal_home() / "embedding_cache.db")
        return self._embedder

    def select(self, question: str, k: int | None = None) -> list[Note]:
        """The notes most relevant to ``question``: BM25 and cosine rankings fused by RRF."""
        from lokal.rag.retrieval import BM25Index, rrf

        k = self.k if k is None else k
        notes = self.notes()
        if not notes or k <= 0:
            return []
        n = max(k * 3, 10)
        keyword = [
            note for note, _ in BM25Index(notes, [x["text"] for x in notes]).search(question, n)
        ]
        vectors = self.embedder().embed([question] + [x["text"] for x in notes])
        scores = vectors[1:] @ vectors[0]
        dense = [notes[i] for i in np.argsort(-scores, kind="stable")[:n]]
        fused = rrf([dense, keyword], key=lambda note: note["id"])[:k]
        return [Note({**note, "score": round(score, 5)}) for note, score in fused]

    # -- MemoryHook ------------------------------------------------------------------------

    def load(self, question: str) -> list[dict[str, Any]]:
        parts = []
        text = self.global_text()
        if text:
            parts.append("Global memory (always true for this user):\n" + text)
        selected = self.select(question)
        if selected:
            lines = [f"- {note['text']} (source: {note['source']})" for note in selected]
            parts.append("Notes that may be relevant:\n" + "\n".join(lines))
        return [{"role": "system", "content": "\n\n".join(parts)}] if parts else []

    def save(self, result: Any) -> None:
        if not self.summarize:
            return
        summary = extractive_summary(result)
        run_id = self.recorder.run_id if self.recorder else None
        label = f"summary of run {run_id}" if run_id else "run summary"
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
