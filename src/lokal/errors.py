"""Exceptions split by who is at fault.

- ``ConfigError``: the caller's mistake (missing file, unknown profile, bad YAML). Raised.
- ``ParseError``: the model's reply holds nothing usable. Inside ``generate_ai_message`` it
  becomes a result with ``status: "error"``; ``parse_model_output`` raises it.
- ``MessageError``: a message does not follow the contract in ``messages.py``.
- ``BackendError``: a backend could not produce text (server down, model failed to load).
"""

from __future__ import annotations


class LokalError(Exception):
    """Base class of every error lokal raises on purpose."""


class ConfigError(LokalError, ValueError):
    """The caller gave a wrong configuration, path or option; the message says how to fix it."""


class MessageError(LokalError, ValueError):
    """A message or tool call does not follow the message contract."""


# What kind of unusable a reply is (``ParseError.kind``), so callers need not read the reason.
PARSE_ERROR_KINDS = (
    "parse_error",  # none of the others, or the parser failed on the text
    "no_reply",  # empty, only punctuation, only <think> reasoning, or not text at all
    "not_a_call",  # a tool-call marker, envelope or plan step that holds no readable call
    "invalid_arguments",  # a call's arguments are not a JSON object
    "unknown_tool",  # a call names a tool that is not among the tools given
    "ambiguous_tool",  # a call's name could mean more than one of the tools given
    "too_many",  # more calls, tags or markers than the parser reads from one reply
    "conflict",  # content and tool calls together, with conflict_policy="error"
    "tools_disabled",  # tool calls where only an answer is allowed
)


class ParseError(LokalError, ValueError):
    """The model's raw text holds no usable AIMessage. ``reason`` says why, ``kind`` (one of
    ``PARSE_ERROR_KINDS``) what sort of problem it is."""

    def __init__(self, reason: str, *, text: str | None = None, kind: str = "parse_error") -> None:
        if kind not in PARSE_ERROR_KINDS:
            raise ValueError(f"ParseError kind must be one of {PARSE_ERROR_KINDS}, got {kind!r}")
        super().__init__(reason)
        self.reason = reason
        self.text = text
        self.kind = kind


class BackendError(LokalError, RuntimeError):
    """A backend failed to produce text (load failure, server error after retries)."""


class BackendDeadline(BackendError):
    """The backend stopped a generation or a scoring because the request's ``deadline``
    passed (llama.cpp aborts its evaluation between two graph nodes)."""
