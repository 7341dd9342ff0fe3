"""The order of attempts: one reply read into a ``ParseResult``.

Special tokens and ``<think>`` blocks are removed; explicit markers are read (``markers``);
then JSON candidates (``values`` finds them, ``shapes`` reads them as calls or an envelope);
then a pythonic call list (``pythonic``); what is left is a final answer in prose. Tool names
are resolved and arguments coerced once, at the end, against the tools given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lokal.errors import ConfigError, ParseError
from lokal.llm.parser.limits import MAX_CALLS
from lokal.llm.parser.markers import marker_calls
from lokal.llm.parser.pythonic import read_pythonic
from lokal.llm.parser.shapes import CallReader, Found, json_message, resolve_tool_name
from lokal.llm.parser.text import (
    MARKERS,
    is_json,
    join,
    meaningful,
    prose,
    split_think,
    strip_special_tokens,
)
from lokal.llm.parser.values import coerce_args
from lokal.messages import assign_call_ids, make_ai_message
from lokal.tools.schema import ToolSpec, tool_specs

__all__ = ["POLICIES", "ParseResult", "parse_model_output"]

POLICIES = ("tool_calls", "content", "error")


@dataclass
class ParseResult:
    """A parsed reply: the AIMessage and a record of how it was read."""

    message: dict
    format: str
    repaired: bool
    preamble: str = ""
    reasoning: str = ""
    conflict: bool = False
    dropped_calls: list = field(default_factory=list)


def tool_index(tools: Any) -> dict[str, ToolSpec]:
    """``{name: ToolSpec}`` from None, ToolSpecs or schemas in OpenAI or flat form."""
    return {spec.name: spec for spec in tool_specs(tools)}


def parse_model_output(
    text: str,
    tools_schema: Any = None,
    *,
    conflict_policy: str = "tool_calls",
    calls_in_think: bool = False,
) -> ParseResult:
    """Read ``text`` into a ParseResult; raise ParseError when it holds nothing usable.

    ``tools_schema`` (None, ``ToolSpec``s, or schemas in OpenAI or flat form) turns on
    tool-name checking and argument coercion. ``conflict_policy`` decides a JSON envelope with
    both content and calls: ``"tool_calls"`` keeps the calls (the content goes to
    ``preamble``), ``"content"`` keeps the content (the calls go to ``dropped_calls``),
    ``"error"`` raises. ``calls_in_think`` accepts calls written inside ``<think>`` when
    nothing outside it has one.
    """
    if conflict_policy not in POLICIES:
        raise ConfigError(f"conflict_policy must be one of {POLICIES}, got {conflict_policy!r}")
    tools = tool_index(tools_schema)
    if not isinstance(text, str):
        raise ParseError(
            f"the model's reply must be text, got {type(text).__name__}", kind="no_reply"
        )
    try:
        return _parse(text, CallReader(tools), conflict_policy, calls_in_think)
    except ParseError as exc:
        exc.text = text if exc.text is None else exc.text
        raise
    except Exception as exc:  # a parser bug must surface as ParseError, never as a crash
        raise ParseError(f"the reply could not be read ({type(exc).__name__})", text=text) from exc


def _parse(text: str, reader: CallReader, policy: str, calls_in_think: bool) -> ParseResult:
    if not text.strip():
        raise ParseError("the reply is empty", kind="no_reply")
    outside, reasoning = split_think(strip_special_tokens(text))
    has_words = meaningful(outside)
    found = _find_calls(outside, reader) if has_words else None
    think_problem = ""
    if calls_in_think and reasoning and (found is None or not found.calls):
        try:
            inside = _find_calls(reasoning, reader)
        except ParseError as exc:
            inside, think_problem = None, f" (inside <think>: {exc.reason})"
        if inside is not None and inside.calls:
            beside = (found.content if found else outside) if has_words else ""
            inside.preamble = beside.strip()  # its own leftover is reasoning, already recorded
            found = inside
    if found is None and not has_words:
        reason = f"the reply holds no answer, only punctuation: {outside.strip()[:40]!r}"
        if not outside.strip():
            hint = "" if calls_in_think else "; calls inside <think> are ignored"
            reason = f"the reply holds only reasoning (<think>), nothing outside it{hint}"
            reason = reason if reasoning else "the reply is empty once special tokens are removed"
        raise ParseError(reason + think_problem, kind="no_reply")
    if found is None:
        found = Found("prose", [], content=prose(outside))
    return _build(found, reader.tools, policy, reasoning)


def _build(found: Found, tools: Mapping[str, ToolSpec], policy: str, reasoning: str) -> ParseResult:
    content, preamble, calls = found.content.strip(), found.preamble, found.calls
    conflict = bool(content) and bool(calls)
    dropped: list = []
    if conflict and policy == "error":
        raise ParseError(
            "the model gave both content and tool_calls (conflict_policy='error'); "
            f"content was {content[:80]!r}",
            kind="conflict",
        )
    if conflict and policy == "content":
        dropped, calls = list(assign_call_ids(_finalize(calls, tools, lenient=True))), []
    elif conflict:
        preamble, content = join(preamble, content), ""
    repaired = found.repaired or any(call.get("repaired") for call in found.calls)
    message = dict(make_ai_message(content, _finalize(calls, tools)))
    return ParseResult(message, found.format, repaired, preamble, reasoning, conflict, dropped)


def _finalize(
    calls: list[dict], tools: Mapping[str, ToolSpec], *, lenient: bool = False
) -> list[dict]:
    """Tool names resolved against the tools and arguments coerced to their types."""
    if len(calls) > MAX_CALLS:
        raise ParseError(
            f"the reply has {len(calls)} tool calls; at most {MAX_CALLS} are read", kind="too_many"
        )
    result = []
    for call in calls:
        name = call["name"]
        try:
            name = resolve_tool_name(name, tools)
        except ParseError:
            if not lenient:
                raise
        args = call["args"]
        if name in tools:
            args = coerce_args(args, tools[name].parameters)
        item = {"name": name, "args": args}
        if isinstance(call.get("id"), str) and call["id"].strip():
            item["id"] = call["id"]
        result.append(item)
    return result


def _find_calls(text: str, reader: CallReader) -> Found | None:
    """Calls (or an envelope's content) in ``text``; None when it holds no call format."""
    problems: list[str] = []
    marker = next((mark for mark in MARKERS if mark in text), None)
    if marker and text.strip()[:1] in ("{", "[") and is_json(text.strip()):
        marker = None  # the markers are inside the strings of one JSON value
    found = marker_calls(text, reader, problems) if marker else None
    hard = None
    if found is None:
        found, hard = json_message(text, reader)
    if found is None:
        found = read_pythonic(text, reader)
    if found is not None:
        return found
    if marker:
        detail = f": {problems[0]}" if problems else ""
        raise ParseError(
            f"the reply has a {marker} marker but no readable tool call{detail}",
            kind="not_a_call",
        )
    if hard is not None:
        raise ParseError(hard.reason, kind=hard.kind)
    return None
