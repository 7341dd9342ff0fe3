"""A test double you script: queue raw replies, then read what the model was asked.

    backend = ScriptedBackend(['{"tool_calls": [{"name": "calculator", "args": {...}}]}',
                               "The answer is 4."])
    result = generate_ai_message(config, messages, tools, backend=backend)
    backend.requests[0].messages   # the prompt the "model" saw

A reply may be a string, a ``Completion``, or a callable taking the GenerationRequest and
returning either (to answer from what was asked). Running out of replies is an error, so a
test that expects two decisions and gets three fails loudly.

``scorer(prefix, continuation) -> log-probability`` makes the double a backend that scores
continuations (the ``score`` capability of staged decisions): ``prefix`` is the part of the
reply already chosen, ``continuation`` one candidate after it. Every scoring call is kept in
``scored`` as ``(prefix, [continuations])``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable

from lokal.llm.backends import Completion, GenerationRequest
from lokal.progress import report

Reply = str | Completion | Callable[[GenerationRequest], "str | Completion"]
Scorer = Callable[[str, str], float]

__all__ = ["ScriptExhausted", "ScriptedBackend"]


class ScriptExhausted(AssertionError):
    """The scripted model was asked more often than replies were queued."""


class ScriptedBackend:
    """Replies in the order queued; records every request (thread-safe)."""

    name = "scripted"

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        capabilities: Iterable[str] = ("prompt_json", "builtin", "constrained"),
        scorer: Scorer | None = None,
    ) -> None:
        self._replies: deque[Reply] = deque(replies)
        extra = ("staged", "score") if scorer is not None else ()
        self.capabilities = frozenset((*capabilities, *extra))
        self.requests: list[GenerationRequest] = []
        self.scorer = scorer
        self.scored: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()

    def queue(self, *replies: Reply) -> ScriptedBackend:
        with self._lock:
            self._replies.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        return len(self._replies)

    def score(self, request: GenerationRequest, continuations: list[str]) -> list[float]:
        if self.scorer is None:
            raise AssertionError("this scripted backend was made without a scorer")
        with self._lock:
            self.scored.append((request.prefix, list(continuations)))
        return [float(self.scorer(request.prefix, c)) for c in continuations]

    def generate(self, request: GenerationRequest) -> Completion:
        with self._lock:
            self.requests.append(request)
            if not self._replies:
                raise ScriptExhausted(
                    f"scripted backend asked for reply #{len(self.requests)} but none is queued"
                )
            reply = self._replies.popleft()
        if callable(reply):
            reply = reply(request)
        if isinstance(reply, Completion):
            return reply
        prompt_chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        tokens = max(1, len(reply) // 4)
        # as a real backend reports its tokens (and their text) to the live progress
        report(tokens=tokens, text=reply)
        return Completion(
            text=reply,
            prompt_tokens=prompt_chars // 4,
            completion_tokens=tokens,
            finish_reason="stop",
        )
