"""Run traces that grow linearly with the run: prompts by content hash.

A ``decision`` event does not carry its whole prompt (each prompt repeats the conversation so
far, so a trace of full prompts grows quadratically with the run). It carries:

- ``prompt_ref``: ``{"hash": H, "base": B, "parts": [...]}``. ``H`` names the prompt (a
  hash of its messages' hashes). ``parts`` build it from the prompt ``B`` given earlier (the
  previous decision's, ``null`` for the first decision of a run): ``[i, j]`` is messages
  ``i`` to ``j - 1`` of ``B``, a string is one message by its hash. A prompt already given
  in the run is ``{"hash": H}`` alone.
- ``prompt_messages``: ``{hash: message}``, the messages of this prompt not given before in
  the run (each distinct message is written once per run).

The rendered prompt a backend may report (``attempts[k]["backend"]["prompt_text"]``, the
chat template's text for llama.cpp) is replaced the same way by ``prompt_text_ref``:
``{"hash": T, "base": B, "parts": [...]}`` where ``[i, j]`` is lines ``i`` to ``j - 1`` of
the text ``B`` (``str.splitlines(keepends=True)``) and a string is literal text; a text
already given in the run is ``{"hash": T}`` alone.

So each decision adds only what is new since the previous one. ``RunResult.events`` follows
the same rule. Readers get the full prompts back with::

    from lokal.trace import expand_events, read_trace

    events = read_trace("trace.jsonl")  # decision events with "prompt" (and "prompt_text")
    events = expand_events(result.events)  # the same for a RunResult (typed events in)

Both give dicts, the trace's JSON objects; ``lokal.events.event_from_dict`` reads one back
into its typed class (``DecisionMade.prompt`` holds an expanded prompt).

``python -m lokal.trace trace.jsonl`` prints the expanded trace as JSON lines. Events in
the old format (a ``prompt`` list) pass through unchanged.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lokal.errors import LokalError
from lokal.events import DecisionMade, RunEvent

__all__ = [
    "PromptEncoder",
    "TraceError",
    "TraceReader",
    "expand_events",
    "message_hash",
    "read_trace",
]

_HASH_CHARS = 16  # 64 bits: no collision among the messages of any trace


class TraceError(LokalError, ValueError):
    """A trace references a prompt, message or text it does not hold (or holds altered)."""


def _digest(data: str) -> str:
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:_HASH_CHARS]


def message_hash(message: dict[str, Any]) -> str:
    """The content hash of one prompt message (canonical JSON)."""
    canonical = json.dumps(
        message, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return _digest(canonical)


def _prompt_hash(hashes: list[str]) -> str:
    return _digest(" ".join(hashes))


def _text_hash(text: str) -> str:
    return _digest(text)


def _delta(base: list[str], items: list[str], *, text: bool) -> list[Any]:
    """``items`` as copies of ranges of ``base`` (``[i, j]``) and literals (strings: one
    message hash each, or a run of text lines joined)."""
    matcher = difflib.SequenceMatcher(None, base, items, autojunk=text)
    parts: list[Any] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            parts.append([i1, i2])
        elif op in ("replace", "insert"):
            if text:
                parts.append("".join(items[j1:j2]))
            else:
                parts.extend(items[j1:j2])
    return parts


def _apply(base: list[str], parts: list[Any], *, text: bool) -> list[str]:
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.extend(part.splitlines(keepends=True) if text else [part])
        elif isinstance(part, list) and len(part) == 2 and 0 <= part[0] <= part[1] <= len(base):
            out.extend(base[part[0] : part[1]])
        else:
            raise TraceError(f"bad part {part!r} in a trace reference")
    return out


class PromptEncoder:
    """Writes the prompts of one run by reference (what ``Agent`` does to its events)."""

    def __init__(self) -> None:
        self._messages: set[str] = set()
        self._prompts: set[str] = set()
        self._last_prompt: tuple[str, list[str]] | None = None
        self._texts: set[str] = set()
        self._last_text: tuple[str, list[str]] | None = None

    def prompt(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """``{"prompt_ref": …, "prompt_messages": …}`` in place of ``{"prompt": messages}``."""
        hashes = [message_hash(m) for m in messages]
        new: dict[str, dict[str, Any]] = {}
        for h, message in zip(hashes, messages, strict=True):
            if h not in self._messages and h not in new:
                new[h] = message
        self._messages.update(new)
        key = _prompt_hash(hashes)
        if key in self._prompts:
            ref: dict[str, Any] = {"hash": key}
        else:
            base, base_items = self._last_prompt or (None, [])
            ref = {"hash": key, "base": base, "parts": _delta(base_items, hashes, text=False)}
            self._prompts.add(key)
            self._last_prompt = (key, hashes)
        return {"prompt_ref": ref, "prompt_messages": new}

    def text(self, text: str) -> dict[str, Any]:
        """The reference that stands for a rendered prompt text."""
        key = _text_hash(text)
        if key in self._texts:
            return {"hash": key}
        lines = text.splitlines(keepends=True)
        base, base_lines = self._last_text or (None, [])
        self._texts.add(key)
        self._last_text = (key, lines)
        return {"hash": key, "base": base, "parts": _delta(base_lines, lines, text=True)}

    def attempts(self, attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The attempts with ``backend.prompt_text`` replaced by ``prompt_text_ref`` (the
        attempts given are not changed)."""
        out = []
        for attempt in attempts:
            backend = attempt.get("backend")
            if isinstance(backend, dict) and isinstance(backend.get("prompt_text"), str):
                backend = {
                    ("prompt_text_ref" if k == "prompt_text" else k): (
                        self.text(v) if k == "prompt_text" else v
                    )
                    for k, v in backend.items()
                }
                attempt = {**attempt, "backend": backend}
            out.append(attempt)
        return out


class TraceReader:
    """Expands events one at a time, in trace order (for a reader that follows a live run;
    ``read_trace`` and ``expand_events`` use it). One reader can read several runs."""

    def __init__(self) -> None:
        self._messages: dict[str, dict[str, Any]] = {}
        self._prompts: dict[str, list[str]] = {}
        self._texts: dict[str, str] = {}

    def expand(self, event: RunEvent | dict[str, Any]) -> dict[str, Any]:
        """``event`` (a trace's dict, or a typed event as a subscriber gets it, read as its
        ``to_dict()``) with ``prompt`` (and each attempt's ``backend.prompt_text``) in full;
        other events, and decisions in the old format, are returned as they are."""
        if isinstance(event, RunEvent):
            event = event.to_dict()
        if event.get("type") != DecisionMade.type or "prompt_ref" not in event:
            return event
        for h, message in (event.get("prompt_messages") or {}).items():
            self._messages[h] = message
        prompt = self._prompt(event["prompt_ref"])
        out: dict[str, Any] = {}
        for key, value in event.items():
            if key == "prompt_ref":
                out["prompt"] = prompt
            elif key == "prompt_messages":
                continue
            elif key == "attempts" and isinstance(value, list):
                out[key] = [self._attempt(a) for a in value]
            else:
                out[key] = value
        return out

    def _prompt(self, ref: dict[str, Any]) -> list[dict[str, Any]]:
        key = ref.get("hash")
        if "parts" in ref:
            base = ref.get("base")
            if base is not None and base not in self._prompts:
                raise TraceError(f"the trace references prompt {base} before giving it")
            hashes = _apply(self._prompts.get(base, []), ref["parts"], text=False)
            if _prompt_hash(hashes) != key:
                raise TraceError(f"prompt {key} does not match its hash")
            self._prompts[key] = hashes
        elif key not in self._prompts:
            raise TraceError(f"the trace references prompt {key} before giving it")
        try:
            return [copy.deepcopy(self._messages[h]) for h in self._prompts[key]]
        except KeyError as exc:
            raise TraceError(
                f"the trace references message {exc.args[0]} it does not hold"
            ) from None

    def _text(self, ref: dict[str, Any]) -> str:
        key = ref.get("hash")
        if "parts" in ref:
            base = ref.get("base")
            if base is not None and base not in self._texts:
                raise TraceError(f"the trace references prompt text {base} before giving it")
            lines = self._texts[base].splitlines(keepends=True) if base is not None else []
            text = "".join(_apply(lines, ref["parts"], text=True))
            if _text_hash(text) != key:
                raise TraceError(f"prompt text {key} does not match its hash")
            self._texts[key] = text
        elif key not in self._texts:
            raise TraceError(f"the trace references prompt text {key} before giving it")
        return self._texts[key]

    def _attempt(self, attempt: Any) -> Any:
        backend = attempt.get("backend") if isinstance(attempt, dict) else None
        if not isinstance(backend, dict) or "prompt_text_ref" not in backend:
            return attempt
        backend = {
            ("prompt_text" if k == "prompt_text_ref" else k): (
                self._text(v) if k == "prompt_text_ref" else v
            )
            for k, v in backend.items()
        }
        return {**attempt, "backend": backend}


def expand_events(events: Iterable[RunEvent | dict[str, Any]]) -> list[dict[str, Any]]:
    """The events (``RunResult.events``' typed events, or a trace's dicts) as dicts, with
    every decision's prompt in full. The events given are not changed."""
    reader = TraceReader()
    return [reader.expand(event) for event in events]


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The events of a JSON-lines trace (``lokal run --trace``, ``JsonlTrace``), with every
    decision's ``prompt`` (and rendered ``prompt_text``) reconstructed."""
    reader = TraceReader()
    events = []
    with Path(path).open(encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{path}:{number}: not a JSON line ({exc.msg})") from None
            events.append(reader.expand(event))
    return events


def main(argv: list[str] | None = None) -> int:
    """``python -m lokal.trace TRACE``: the trace with full prompts, as JSON lines."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m lokal.trace TRACE.jsonl", file=sys.stderr)
        return 2
    try:
        events = read_trace(args[0])
    except (OSError, TraceError) as exc:
        print(f"lokal.trace: {exc}", file=sys.stderr)
        return 1
    try:
        for event in events:
            sys.stdout.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `python -m lokal.trace FILE | head`: the reader went away
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, as every lokal command (lokal.cli.common.EXIT_BROKEN_PIPE)
    return 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that flushing at exit raises nothing (the recipe of the
    docs of Python's signal module); lokal.cli does the same."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())
