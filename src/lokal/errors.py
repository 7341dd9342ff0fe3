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


class ParseError(LokalError, ValueError):
    """The model's raw text holds no usable AIMessage. ``reason`` says why."""

    def __init__(self, reason: str, *, text: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.text = text


class BackendError(LokalError, RuntimeError):
    """A backend failed to produce text (load failure, server error after retries)."""
