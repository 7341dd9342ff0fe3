"""Streaming: the answer's text as the model writes it, tool calls once validated.

The backend reports each token's text to the progress listener (``report(tokens=1,
text=...)``), and ``lokal serve``'s backend wrapper reports the start of every generation
that writes a whole reply (``streamable``: no prefix chosen before it, as the argument steps
of a staged decision have). ``ContentStreamer`` reads that raw text and gives the part of the
answer that is new:

- prose is sent as it comes, holding back only text that could begin a tool-call marker
  (``<tool_call>``, ``[TOOL_CALLS]``, ``<|python_tag|>``, a fence, a pythonic ``[f(``...) and
  trailing spaces; once a marker appears, nothing more of that reply is sent;
- a JSON envelope (``{"content": "..."}``, what prompt_json, constrained and staged replies
  are) is decoded as it grows, and its content is sent, never the JSON;
- a reply that is a call sends nothing: the calls are sent after they were parsed and
  validated.

A retry writes its reply from the start: what it writes is sent only once it goes past what
was already sent, so a retry that writes the same answer continues the stream seamlessly.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from pydantic_core import from_json

__all__ = ["MARKERS", "ContentStreamer", "chunk", "sse_data", "tool_call_chunks"]

MARKERS = (
    "<tool_call>",
    "<function=",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "<|tool_call",
    "<tools>",
    "```",
)
_PYTHONIC = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_PYTHONIC_START = re.compile(r"\[\s*[A-Za-z_]?[\w.]*\s*$")
_CALL_KEYS = ("tool_calls", "name", "tool", "function", "arguments", "parameters")


def _held_tail(text: str) -> int:
    """How many characters at the end of ``text`` could begin a marker."""
    longest = 0
    for marker in MARKERS:
        for k in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:k]):
                longest = k
                break
    return longest


def visible_content(raw: str) -> str | None:
    """The answer text that ``raw`` (a reply being written) shows so far; None when the reply
    is a call (nothing of it is content)."""
    text = raw.lstrip()
    if text.startswith("<think>"):
        end = text.find("</think>")
        if end < 0:
            return ""
        text = text[end + len("</think>") :].lstrip()
    if not text:
        return ""
    if text[0] == "{":
        try:
            value = from_json(text, allow_partial="trailing-strings")
        except ValueError:
            return ""
        if not isinstance(value, dict):
            return ""
        if any(value.get(key) for key in _CALL_KEYS):
            return None
        content = value.get("content")
        return content if isinstance(content, str) else ""
    if any(marker.startswith(text) for marker in MARKERS) or _PYTHONIC_START.match(text):
        return ""  # could still become a marker: hold it
    if any(text.startswith(marker) for marker in MARKERS) or _PYTHONIC.match(text):
        return None
    cut = min((i for i in (text.find(m) for m in MARKERS) if i >= 0), default=-1)
    if cut >= 0:
        return text[:cut].rstrip()
    text = text.rstrip()
    held = _held_tail(text)
    return text[: len(text) - held].rstrip() if held else text


class ContentStreamer:
    """The new part of the answer, from the raw text of the generations as they come."""

    def __init__(self) -> None:
        self.sent = ""
        self.raw = ""
        self.active = False
        self.live = True

    def start(self, streamable: bool) -> None:
        """A generation begins (``streamable``: it writes a whole reply)."""
        self.raw = ""
        self.active = streamable

    def feed(self, text: str) -> str:
        """The text to send now after ``text`` was generated ("" for nothing)."""
        if not (self.active and self.live and text):
            return ""
        self.raw += text
        visible = visible_content(self.raw)
        if visible is None:
            self.active = False  # this reply is a call
            return ""
        if not visible.startswith(self.sent):
            if not self.sent.startswith(visible):
                self.live = False  # a retry writes something else: wait for the decision
            return ""
        delta = visible[len(self.sent) :]
        self.sent = visible
        return delta

    def finish(self, content: str) -> tuple[str, bool]:
        """The rest of the decided answer ``content``, and whether what was sent is not its
        beginning (a retry replaced an answer already streamed)."""
        if content.startswith(self.sent):
            return content[len(self.sent) :], False
        return "", True


def chunk(
    ident: str,
    model: str,
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    include_usage: bool = False,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with one choice."""
    out: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }
    if include_usage:
        out["usage"] = None
    if extra:
        out.update(extra)
    return out


def tool_call_chunks(tool_calls: list[dict[str, Any]], piece: int = 24) -> list[dict[str, Any]]:
    """The deltas of validated calls, as the spec sends them: for call ``i``, first
    ``{index, id, type, function: {name, arguments: ""}}``, then ``arguments`` in fragments
    (never None; ``"{}"`` for a call without arguments)."""
    deltas = []
    for index, call in enumerate(tool_calls):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), piece):
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "function": {"arguments": arguments[start : start + piece]},
                        }
                    ]
                }
            )
    return deltas


def sse_data(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
