"""Call shapes: which decoded JSON values are tool calls or a message envelope, and which tool
a call's name means.

Shapes read: ``{"name", "arguments"}`` (also ``parameters``, ``args``, ``input`` ...), the
OpenAI ``{"function": {...}}`` wrapper, the flat ``{"tool": NAME, ...}`` form, lists of calls
and the envelope ``{"content", "tool_calls": [...]}``. ``CallReader`` does this for one reply:
it holds the tools (``{name: ToolSpec}``) and the reply's json_repair budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lokal.errors import ParseError
from lokal.llm.parser.limits import MAX_CALLS
from lokal.llm.parser.text import leftover
from lokal.llm.parser.values import (
    DECODER,
    SEPARATORS,
    Cand,
    Repairer,
    decode_arguments,
    find_json,
)
from lokal.tools.schema import ToolSpec

__all__ = ["CallReader", "Found", "Reject", "json_message", "resolve_tool_name"]

_NAME_SEPARATORS = str.maketrans({"-": "_", ".": "_"})  # file-reader, file.reader: file_reader
_ARG_KEYS = ("arguments", "parameters", "args", "tool_arguments", "tool_input", "input")
_CALL_META = frozenset({"id", "type", "name", "index", "function", "tool_name"})
_ENVELOPE_KEYS = frozenset(
    {"role", "content", "tool_calls", "reasoning", "reasoning_content", "thought", "refusal"}
)


def _name_key(name: str) -> str:
    return name.strip().lower().translate(_NAME_SEPARATORS)


def resolve_tool_name(name: str, tools: Mapping[str, Any]) -> str:
    """The name of the tool in ``tools`` that ``name`` means; raise ParseError if none or many.

    An exact match wins. Otherwise case is ignored and ``_``, ``.`` and ``-`` count as the same
    character (``math_factorial`` finds ``math.factorial``), and an OpenAI-style ``functions.``
    prefix is dropped. With no tools every non-empty name is accepted. Only the keys of
    ``tools`` (the tool names) are read.
    """
    if not isinstance(name, str) or not name.strip():
        raise ParseError(f"a tool call has no usable name (got {name!r})", kind="not_a_call")
    if name in tools or not tools or name.strip() in tools:
        return name if name in tools else name.strip()
    key = _name_key(name)
    matches = [tool for tool in tools if _name_key(tool) == key]
    if not matches and key.startswith("functions_"):
        matches = [tool for tool in tools if _name_key(tool) == key[len("functions_") :]]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ParseError(
            f"tool name {name.strip()!r} is ambiguous: it could mean {', '.join(sorted(matches))}",
            kind="ambiguous_tool",
        )
    raise ParseError(
        f"unknown tool {name.strip()!r}; available tools: {', '.join(tools)}", kind="unknown_tool"
    )


@dataclass
class Found:
    """What a reply (or part of it) was read as."""

    format: str
    calls: list[dict]
    content: str = ""
    preamble: str = ""
    repaired: bool = False


class Reject(Exception):
    """This candidate is not a usable message; other candidates may still be.

    ``kind`` is the ``ParseError`` kind it becomes when the whole reply is this candidate.
    """

    def __init__(self, reason: str, kind: str = "not_a_call") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


class CallReader:
    """Reads decoded JSON values as tool calls or an envelope, for one reply.

    It holds the tools (for names that need them) and the reply's json_repair budget.
    """

    def __init__(self, tools: Mapping[str, ToolSpec], repairer: Repairer | None = None) -> None:
        self.tools = tools
        self.repairer = repairer or Repairer()

    def properties(self, name: str) -> dict:
        """The parameter schemas of tool ``name``; empty for a tool not given."""
        spec = self.tools.get(name)
        return spec.properties if spec is not None else {}

    def known(self, name: str) -> bool:
        try:
            return bool(self.tools) and bool(resolve_tool_name(name, self.tools))
        except ParseError:
            return False

    def sequence(self, text: str, pos: int, *, repair: bool) -> tuple[list, int, bool]:
        """Calls in JSON values one after another from ``pos``: (calls, end, repaired)."""
        calls: list[dict] = []
        repaired = False
        while len(calls) <= MAX_CALLS:
            start = SEPARATORS.match(text, pos).end()  # type: ignore[union-attr]
            if text[start : start + 1] not in ("{", "["):
                break
            try:
                value, end = DECODER.raw_decode(text, start)
                fixed = False
            except (ValueError, RecursionError):
                if not repair:
                    break
                value, end, fixed = self.repairer.repair(text[start:]), len(text), True
            try:
                found = self.shape(value, fixed) if value is not None else None
            except Reject:
                found = None
            if found is None or not found.calls:
                break
            calls.extend(found.calls)
            pos, repaired = end, repaired or fixed
        return calls, pos, repaired

    def shape(self, value: Any, repaired: bool = False) -> Found | None:
        """The message shape of a decoded value; None when it is not a message."""
        if isinstance(value, dict):
            if "tool_calls" in value or (
                "content" in value
                and set(value) <= _ENVELOPE_KEYS
                and value.get("role", "assistant") == "assistant"
            ):
                found = self._envelope(value)
                found.repaired = repaired
                return found
            hit = self.call(value, in_envelope=False)
            return None if hit is None else Found(hit[0], [hit[1]], repaired=repaired)
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            hits = [self.call(item, in_envelope=False) for item in value]
            if repaired and len(hits) > 1 and hits[-1] is None:
                hits.pop()  # the call that was cut off when the output was truncated
            if any(hit is None for hit in hits):
                return None
            return Found("call_list", [hit[1] for hit in hits if hit], repaired=repaired)
        return None

    def _envelope(self, value: dict) -> Found:
        content = value.get("content")
        if isinstance(content, list):  # OpenAI content parts
            texts = [part.get("text") if isinstance(part, dict) else part for part in content]
            content = "".join(texts) if all(isinstance(t, str) for t in texts) else content
        if content is not None and not isinstance(content, str):
            raise Reject(f"the envelope's content must be text, got {type(content).__name__}")
        raw_calls = value.get("tool_calls") or []
        raw_calls = [raw_calls] if isinstance(raw_calls, dict) else raw_calls
        if not isinstance(raw_calls, list):
            raise Reject(
                f"the envelope's tool_calls must be a list, not {type(raw_calls).__name__}"
            )
        calls = []
        for index, item in enumerate(raw_calls):
            hit = self.call(item, in_envelope=True) if isinstance(item, dict) else None
            if hit is None:
                raise Reject(f"tool_calls[{index}] is not a tool call (it names no tool)")
            calls.append(hit[1])
        if not (content or "").strip() and not calls:
            raise Reject("the JSON envelope has neither content nor tool_calls", kind="no_reply")
        return Found("json_envelope", calls, content=content or "")

    def call(self, obj: dict, *, in_envelope: bool) -> tuple[str, dict] | None:
        """(format, raw call) when ``obj`` is one tool call; raise Reject for bad arguments."""
        function = obj.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            fmt, name = "function_wrapper", function["name"]
            holder = function if any(key in function for key in _ARG_KEYS) else obj
        elif isinstance(function, str) and any(key in obj for key in _ARG_KEYS):
            fmt, name, holder = "single_call", function, obj
        elif isinstance(obj.get("name") or obj.get("tool_name"), str):
            fmt, name, holder = "single_call", obj.get("name") or obj["tool_name"], obj
        elif isinstance(obj.get("tool"), str):
            return self._flat_tool(obj)
        else:
            return None
        key = next((key for key in _ARG_KEYS if key in holder), None)
        ident = obj.get("id") if isinstance(obj.get("id"), str) else None
        raw = holder[key] if key else None
        if key is None:
            extra = {k: v for k, v in holder.items() if k not in _CALL_META}
            if extra and holder is obj and self.known(name):  # {"name": "calculator", "expr…}
                return "flat_tool", {"id": ident, "name": name, "args": extra}
            if extra or not (in_envelope or self.known(name)):
                return None  # {"name": "Alice", "age": 3} is data, not a call
        elif "description" in holder and isinstance(raw, dict) and "properties" in raw:
            return None  # a tool schema echoed back, not a call
        args, repaired = self.arguments(raw, name)
        return fmt, {"id": ident, "name": name, "args": args, "repaired": repaired}

    def _flat_tool(self, obj: dict) -> tuple[str, dict]:
        """The flat form ``{"tool": NAME, ...arguments}`` (or one nested arguments object)."""
        name = obj["tool"]
        rest = {key: value for key, value in obj.items() if key != "tool"}
        if len(rest) == 1:
            ((key, value),) = rest.items()
            nested = isinstance(value, dict) or str(value).strip().startswith("{")
            if key in _ARG_KEYS and key not in self.properties(name) and nested:
                args, repaired = self.arguments(value, name)
                return "flat_tool", {"id": None, "name": name, "args": args, "repaired": repaired}
        return "flat_tool", {"id": None, "name": name, "args": rest}

    def arguments(self, raw: Any, name: str) -> tuple[dict, bool]:
        """``raw`` arguments decoded (with this reply's repair); Reject when not an object."""
        try:
            return decode_arguments(raw, self.repairer.repair)
        except ValueError as exc:
            raise Reject(
                f"the arguments of {name!r} are not usable: {exc}", kind="invalid_arguments"
            ) from None


def json_message(text: str, reader: CallReader) -> tuple[Found | None, Reject | None]:
    """The first envelope, or else all calls, among the JSON values in ``text``; strict ones
    first. With nothing found, the Reject of a broken value that is the whole text, if any."""
    cands = find_json(text, reader.repairer)
    hard: Reject | None = None
    strict = [c for c in cands if not c.repaired and not c.nested]
    for tier in (strict, [c for c in cands if c.repaired or c.nested]):
        picked: list[tuple[Cand, Found]] = []
        for cand in tier:
            if any(p.start <= cand.start and cand.end <= p.end for p, _ in picked):
                continue  # a part of a value already read
            try:
                shape = reader.shape(cand.value, cand.repaired)
            except Reject as exc:
                if hard is None and not leftover(text, [(cand.start, cand.end)]):
                    hard = exc  # the whole reply is this broken value
                continue
            if shape is not None and shape.format == "json_envelope" and not picked:
                shape.preamble = leftover(text, [(cand.start, cand.end)])
                return shape, None
            if shape is not None and shape.format != "json_envelope":
                picked.append((cand, shape))
        if picked:
            fmt = picked[0][1].format if len(picked) == 1 else "call_list"
            calls = [call for _, shape in picked for call in shape.calls]
            found = Found(fmt, calls, repaired=any(c.repaired or f.repaired for c, f in picked))
            found.preamble = leftover(text, [(cand.start, cand.end) for cand, _ in picked])
            return found, None
    return None, hard
