"""The honest fallback: when the model cannot write a usable answer but a tool result holds
one, the answer is the passage of that result that answers the question.

The passages are the lines, sentences and ``key: value`` pairs of the latest tool results
(``lokal.llm.evidence.result_passages``), less those that cannot answer (a heading, a tool's
bookkeeping; ``lokal.llm.evidence.answerable``). The embedding model ranks them against
the question and the closest is the answer; the model's own likelihood of each of the
closest as the reply can choose instead (``by="likelihood"``), but measured on the
development questions it chose worse (``CHOOSE_BY``). The passage is shown once, with the
tool and file it came from, and the decision marks the answer ``extracted``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lokal.config import GenerationSettings
from lokal.llm.backends import Backend, GenerationRequest
from lokal.llm.evidence import Passage, answerable, rank_passages, result_passages, says_something
from lokal.llm.select import ToolSelector
from lokal.messages import last_user_text

__all__ = ["Extracted", "choose_passage", "extract_answer", "render_extracted", "says_something"]

CANDIDATES = 4  # passages the embedding model keeps for the likelihood to choose from
# what chooses among them: the embedding's closest. On 20 development questions over the
# workspace files (benchmarks/extraction_choice.py, docs/decisions.md) the closest passage
# held the answer for 17; the bundled model's likelihood among the closest 2, 3 and 4 chose
# one that did for 14, 8 and 7: a 135M model finds short, fluent lines likelier, not the
# ones that answer
CHOOSE_BY: Literal["embedding", "likelihood"] = "embedding"


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


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.casefold())) + " "


def _reply_text(raw: str) -> str:
    """The answer a raw reply wrote: its envelope's ``content``, or the text itself."""
    try:
        content = json.loads(raw).get("content")
    except (ValueError, AttributeError):
        return raw
    return content if isinstance(content, str) else raw


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
    by: Literal["embedding", "likelihood"] = CHOOSE_BY,
) -> Extracted | None:
    """The passage that answers ``question``: the embedding model ranks them and keeps the
    ``k`` closest; ``by="embedding"`` takes the closest, ``by="likelihood"`` the one the
    model (where the backend scores) finds likeliest as the reply, with every candidate's
    score recorded. None without passages."""
    if not passages:
        return None
    passages = answerable(question, passages)
    top = rank_passages(question, passages, k=k, selector=selector)
    if len(top) == 1 or backend is None or by == "embedding":
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
    refused: Sequence[str] = (),
) -> Extracted | None:
    """The passage of the latest tool results that answers the last question, or None when
    no call of the latest round succeeded (there is nothing to extract from). A passage
    the model's ``refused`` replies were, whole (a sentence of five words or more), is not
    given again ("This guide shows how to work with the local agent runtime." failed the
    checks as the model's answer; it does not come back as lokal's)."""
    question = last_user_text(list(messages))
    passages = answerable(question, [p for p in result_passages(messages) if not p.failed])
    said = {_words(_reply_text(text)) for text in refused}
    # a sentence, not a value: "result: 25" refused for a label beside it is still the answer
    passages = [
        p for p in passages if len(_words(p.text).split()) < 5 or _words(p.text) not in said
    ] or passages
    return choose_passage(
        question, passages, backend=backend, settings=settings, selector=selector, k=k
    )
