"""The decision record: what ``generate_ai_message`` returns, typed, with ``to_dict()`` giving
the JSON shape that ``result.json``, the trace and ``lokal decide`` have always written.

A decision is a list of attempts; each attempt that failed says why (a ``DecisionError`` with
a ``type`` from ``ERROR_KINDS``) and, when lokal asked again, the corrective message it sent.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

__all__ = ["ERROR_KINDS", "Attempt", "Decision", "DecisionError", "ErrorKind", "Usage"]

ErrorKind = Literal[
    "parse_error",  # no usable AIMessage in the reply (see ParseError.kind for the detail)
    "unknown_tool",  # the reply called a tool that does not exist
    "invalid_arguments",  # a call's arguments do not fit the tool's schema
    "bad_reply",  # parsed, but a loop, cut off, a placeholder or an echo of the prompt
    "backend_error",  # the backend produced no text at all
    "timeout",  # the decision ran past tool_calling.decision_budget_s (see Decision.partial)
]
ERROR_KINDS: tuple[str, ...] = ErrorKind.__args__  # type: ignore[attr-defined]


@dataclasses.dataclass
class Usage:
    """Tokens read and written; None when a backend does not report them."""

    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens = (self.prompt_tokens or 0) + (other.prompt_tokens or 0)
        self.completion_tokens = (self.completion_tokens or 0) + (other.completion_tokens or 0)

    def to_dict(self) -> dict[str, int | None]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclasses.dataclass
class DecisionError:
    """Why an attempt (or the whole decision) failed."""

    type: str
    message: str
    parse_kind: str | None = None  # ParseError.kind when type is parse_error or unknown_tool

    def __post_init__(self) -> None:
        if self.type not in ERROR_KINDS:
            raise ValueError(f"error type must be one of {', '.join(ERROR_KINDS)}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.parse_kind is not None:
            out["parse_kind"] = self.parse_kind
        return out


@dataclasses.dataclass
class Attempt:
    """One request to the backend and what came of it."""

    number: int
    raw_text: str = ""
    status: Literal["success", "error"] | None = None
    error: DecisionError | None = None
    latency_ms: float | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    format: str | None = None  # the parse format of a successful attempt
    staged: dict[str, Any] | None = None  # the staged engine's evidence
    backend: dict[str, Any] | None = None  # what the backend reported besides the text
    corrective: str | None = None  # the message lokal sent back after this attempt failed

    def fail(self, kind: str, message: str, parse_kind: str | None = None) -> None:
        self.status = "error"
        self.error = DecisionError(kind, message, parse_kind)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attempt": self.number, "raw_text": self.raw_text}
        if self.latency_ms is not None:
            out["latency_ms"] = self.latency_ms
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        if self.finish_reason is not None or self.usage is not None:
            out["finish_reason"] = self.finish_reason
        if self.staged is not None:
            out["staged"] = self.staged
        if self.backend is not None:
            out["backend"] = self.backend
        if self.status is not None:
            out["status"] = self.status
        if self.error is not None:
            out["error"] = self.error.to_dict()
        if self.format is not None or self.status == "success":
            out["format"] = self.format
        if self.corrective is not None:
            out["corrective"] = self.corrective
        return out


@dataclasses.dataclass
class Decision:
    """The result of one ``generate_ai_message`` call.

    ``status`` is ``success`` with an ``ai_message`` (content or tool calls), or ``error`` with
    the ``error`` of the last attempt. ``parse`` holds the parse details of the accepted reply
    (``format``, ``repaired``, ``attempts`` and what the parser noticed).
    """

    model: dict[str, Any]
    strategy: str
    purpose: str
    tool_calling: str
    prompt: list[dict[str, Any]]
    status: Literal["success", "error"] = "error"
    ai_message: dict[str, Any] | None = None
    raw_text: str = ""
    usage: Usage = dataclasses.field(default_factory=Usage)
    latency_ms: float = 0.0
    parse: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"format": None, "repaired": False, "attempts": 0}
    )
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    error: DecisionError | None = None
    dropped_messages: int = 0
    fallback: str | None = None  # why the profile's tool calling could not be used as is
    selection: dict[str, Any] | None = None  # the tool preselection, when the profile uses it
    # a decision stopped by its time budget: what was found so far (complete calls, stage)
    partial: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list((self.ai_message or {}).get("tool_calls") or [])

    @property
    def mode(self) -> str:
        """The decision's name in the original command lines' ``--mode`` vocabulary."""
        if self.strategy == "plan_execute":
            return "plan_execute"
        return "mock" if self.model.get("backend") == "mock" else "prompt_json"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "ai_message": self.ai_message,
            "raw_text": self.raw_text,
            "usage": self.usage.to_dict(),
            "latency_ms": self.latency_ms,
            "parse": self.parse,
            "attempts": [attempt.to_dict() for attempt in self.attempts],
            "error": self.error.to_dict() if self.error else None,
            "model": self.model,
            "mode": self.mode,
            "strategy": self.strategy,
            "purpose": self.purpose,
            "tool_calling": self.tool_calling,
            "dropped_messages": self.dropped_messages,
            "prompt": self.prompt,
        }
        if self.fallback is not None:
            out["fallback"] = self.fallback
        if self.selection is not None:
            out["selection"] = self.selection
        if self.partial is not None:
            out["partial"] = self.partial
        return out
