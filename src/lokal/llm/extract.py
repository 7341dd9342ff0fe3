"""The honest fallback: when the model cannot write a usable answer but a tool result holds
one, the answer is the passage of that result that answers the question.

The passages are the lines, sentences and ``key: value`` pairs of the latest tool results
(``lokal.llm.evidence.result_passages``). The embedding model keeps the few closest to the
question; where the backend scores continuations, the model's own likelihood of each as the
answer (per token) picks one among them, so the choice is the model's reading, not only
word overlap. The passage is shown once, with the tool and file it came from, and the
decision marks the answer ``extracted``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lokal.config import GenerationSettings
from lokal.llm.backends import Backend, GenerationRequest
from lokal.llm.evidence import Passage, rank_passages, result_passages
from lokal.llm.select import ToolSelector
from lokal.messages import last_user_text

__all__ = ["Extracted", "choose_passage", "extract_answer", "render_extracted", "says_something"]

CANDIDATES = 4  # passages the embedding model keeps for the likelihood to choose from


@dataclass(frozen=True)
class Extracted:
    """The chosen passage, how many were considered, and each one's per-token score by the
    model (empty when the backend cannot score)."""

    passage: Passage
    candidates: int
    scores: tuple[float, ...] = ()

    @property
    def text(self) -> str:
        return render_extracted(self.passage)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passage": self.passage.text,
            "tool": self.passage.tool,
            "file": self.passage.file,
            "candidates": self.candidates,
            "scores": [round(s, 4) for s in self.scores],
        }


def says_something(text: str) -> bool:
    """Whether a passage can be an answer: a ``key: value`` field, or at least two words
    (four characters of Chinese or Japanese), not a lone heading."""
    return ": " in text or len(text.split()) >= 2 or (len(text.strip()) >= 4 and not text.isascii())


def render_extracted(passage: Passage) -> str:
    """The passage as a user reads it: once, then where it came from."""
    return f"{passage.text}\n\n(quoted from {passage.origin})"


def _likelihoods(
    backend: Backend, question: str, passages: Sequence[Passage], settings: GenerationSettings
) -> list[float] | None:
    """The model's mean log-probability per token (about four characters) of each passage
    as the reply to the question, or None when the backend does not score."""
    if "score" not in getattr(backend, "capabilities", ()) or not callable(
        getattr(backend, "score", None)
    ):
        return None
    request = GenerationRequest(
        messages=[{"role": "user", "content": question}], settings=settings, purpose="final"
    )
    try:
        totals = backend.score(request, [p.text for p in passages])
    except Exception:
        return None
    return [total / max(1.0, len(p.text) / 4) for total, p in zip(totals, passages, strict=True)]


def choose_passage(
    question: str,
    passages: Sequence[Passage],
    *,
    backend: Backend = None,
    settings: GenerationSettings | None = None,
    selector: ToolSelector | None = None,
    k: int = CANDIDATES,
) -> Extracted | None:
    """The passage that answers ``question``: the embedding model keeps the ``k`` closest,
    the model's likelihood (where the backend scores) picks one; None without passages."""
    if not passages:
        return None
    # a title ("Notes") names a document; it answers nothing while a sentence or field can
    passages = [p for p in passages if says_something(p.text)] or list(passages)
    top = rank_passages(question, passages, k=k, selector=selector)
    if len(top) == 1 or backend is None:
        return Extracted(top[0], len(top))
    scores = _likelihoods(backend, question, top, settings or GenerationSettings())
    if scores is None:
        return Extracted(top[0], len(top))
    best = max(range(len(top)), key=lambda i: (scores[i], -i))
    return Extracted(top[best], len(top), tuple(scores))


def extract_answer(
    messages: Sequence[dict[str, Any]],
    *,
    backend: Backend = None,
    settings: GenerationSettings | None = None,
    selector: ToolSelector | None = None,
    k: int = CANDIDATES,
) -> Extracted | None:
    """The passage of the latest tool results that answers the last question, or None when
    no call of the latest round succeeded (there is nothing to extract from)."""
    passages = [p for p in result_passages(messages) if not p.failed]
    question = last_user_text(list(messages))
    return choose_passage(
        question, passages, backend=backend, settings=settings, selector=selector, k=k
    )
