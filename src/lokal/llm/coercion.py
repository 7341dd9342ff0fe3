"""The value-level half of the output parser (``parsing.py`` is the text-level half).

Tool names, argument decoding and lossless type coercion; which decoded JSON values are tool
calls or a message envelope (``CallReader``, which also owns the bounded use of json_repair);
and the literal-only reading of pythonic calls with ``ast`` (nothing is ever evaluated).
``resolve_tool_name`` and ``coerce_args`` are public through ``lokal.llm.parsing``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from json_repair import repair_json

from lokal.errors import ConfigError, ParseError
from lokal.schema import json_schema_type

__all__ = [
    "CallReader",
    "Found",
    "Reject",
    "bracket_walk",
    "coerce_args",
    "decode_arguments",
    "embedded_pythonic",
    "pythonic_calls",
    "resolve_tool_name",
    "xml_value",
]

_NAME_SEPARATORS = str.maketrans({"-": "_", ".": "_"})  # file-reader, file.reader: file_reader
_MAX_DEPTH = 32  # nesting depth coercion follows; deeper values are left as they are
_MAX_NESTING = 64  # deeper brackets are not handed to json_repair (it turns quadratic there)
_MAX_REPAIRS = 4  # json_repair calls per reply ...
_MAX_REPAIR_CHARS = 50_000  # ... each on at most this many characters ...
_MAX_REPAIR_TOTAL = 100_000  # ... and on at most this many in all
_MAX_PYTHONIC_CHARS = 20_000  # longest text handed to ast.parse
_MAX_PYTHONIC_SCANS = 64  # "tool_name(" occurrences examined in prose
_ARG_KEYS = ("arguments", "parameters", "args", "tool_arguments", "tool_input", "input")
_CALL_META = frozenset({"id", "type", "name", "index", "function", "tool_name"})
_ENVELOPE_KEYS = frozenset(
    {"role", "content", "tool_calls", "reasoning", "reasoning_content", "thought", "refusal"}
)
_MAX_CALLS = 64  # calls read from one run of JSON values
_SEPARATORS = re.compile(r"[\s;,]*")  # between JSON values one after another
_DECODER = json.JSONDecoder()
_BRACKETS = re.compile(r'["\\\[\]{}]')
_PARENS = re.compile(r"[()\"'\\]")


def _name_key(name: str) -> str:
    return name.strip().lower().translate(_NAME_SEPARATORS)


def resolve_tool_name(name: str, tools: dict[str, dict]) -> str:
    """The name of the tool in ``tools`` that ``name`` means; raise ParseError if none or many.

    An exact match wins. Otherwise case is ignored and ``_``, ``.`` and ``-`` count as the same
    character (``math_factorial`` finds ``math.factorial``), and an OpenAI-style ``functions.``
    prefix is dropped. With no tools every non-empty name is accepted.
    """
    if not isinstance(name, str) or not name.strip():
        raise ParseError(f"a tool call has no usable name (got {name!r})")
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
            f"tool name {name.strip()!r} is ambiguous: it could mean {', '.join(sorted(matches))}"
        )
    raise ParseError(f"unknown tool {name.strip()!r}; available tools: {', '.join(tools)}")


def decode_arguments(
    arguments: Any, repair: Callable[[str], Any] | None = None
) -> tuple[dict[str, Any], bool]:
    """Arguments as a dict and whether repair was needed; ValueError when not an object.

    ``None`` and ``""`` mean no arguments. A JSON string is decoded, also when it was encoded
    twice. ``repair`` (text -> value or None) is tried on a string that is not strict JSON.
    """
    value = arguments
    for _ in range(3):
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}, False
        if isinstance(value, dict):
            return value, False
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            fixed = repair(value) if repair and value.strip()[:1] in "{[" else None
            if isinstance(fixed, dict):
                return fixed, True
            raise ValueError("arguments are a string that is not a JSON object") from None
    raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")


# --- lossless coercion to schema types ------------------------------------------------------


def _types(schema: dict[str, Any]) -> set[str]:
    """JSON Schema type names a schema node allows (also from anyOf/oneOf branches)."""
    nodes = [schema]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            nodes.extend(node for node in schema[key] if isinstance(node, dict))
    found: set[str] = set()
    for node in nodes:
        declared = node.get("type")
        for name in declared if isinstance(declared, list) else [declared]:
            try:
                mapped = json_schema_type(name) if isinstance(name, str) else None
            except ConfigError:
                mapped = None
            found.update([mapped] if mapped else [])
    return found


def _is_type(value: Any, kind: str) -> bool:
    checks = {
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "integer": lambda v: isinstance(v, int),  # 5.0 is turned into 5 by _convert
        "number": lambda v: isinstance(v, int | float),
    }
    return not (isinstance(value, bool) and kind in ("integer", "number")) and checks[kind](value)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_of(text: str, kinds: tuple[type, ...]) -> Any:
    """``text`` decoded as strict JSON when it is one of ``kinds`` (no NaN/Infinity); else None."""
    try:
        value = json.loads(text.strip(), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return None
    return None if isinstance(value, bool) or not isinstance(value, kinds) else value


def _convert(value: Any, types: set[str]) -> Any:
    """``value`` converted to one of ``types`` when nothing is lost; else ``value`` itself."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        number = _json_of(value, (int, float)) if types & {"integer", "number"} else None
        if "null" in types and lowered in ("null", "none"):
            return None
        if "boolean" in types and lowered in ("true", "false"):
            return lowered == "true"
        if "integer" in types and isinstance(number, int):
            return number
        if "integer" in types and isinstance(number, float) and number.is_integer():
            return int(number) if abs(number) < 2**53 else value
        if "number" in types and number is not None:
            return number
        for kind, cls in (("object", dict), ("array", list)):
            found = _json_of(value, (cls,)) if kind in types else None
            if found is not None:
                return found
        return value
    if isinstance(value, float) and math.isfinite(value):
        if "integer" in types and value.is_integer() and abs(value) < 2**53:
            return int(value)
        return json.dumps(value) if "string" in types else value
    if isinstance(value, int) and not isinstance(value, bool) and "string" in types:
        return str(value)
    return value


def _coerce(value: Any, schema: Any, depth: int) -> Any:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return value
    types = _types(schema)
    if types and not any(_is_type(value, kind) for kind in types):
        value = _convert(value, types)
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else None
        return {k: _coerce(v, props.get(k, extra), depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items")
        return [
            _coerce(item, prefix[index] if index < len(prefix) else items, depth + 1)
            for index, item in enumerate(value)
        ]
    return value


def coerce_args(args: dict, parameters_schema: dict) -> dict:
    """A copy of ``args`` with values converted to the schema's types where nothing is lost.

    ``"5"`` becomes 5 for an integer, ``"2.5"`` 2.5 for a number, ``"true"`` True for a boolean,
    ``"null"`` None for null, a JSON string of an object or array the object or array, and a
    number its string for a string parameter. Nested properties and array items are followed.
    Anything else is left as it is: validation against the schema happens elsewhere.
    """
    if not isinstance(args, dict) or not isinstance(parameters_schema, dict):
        return args
    coerced = _coerce(args, {"type": "object", **parameters_schema}, 0)
    return coerced if isinstance(coerced, dict) else args


def xml_value(raw: str, schema: Any) -> Any:
    """A Qwen XML ``<parameter>`` value: kept as text for string parameters, else decoded.

    Exactly one leading and one trailing newline is removed first. Without a string type the
    value is decoded when it is a JSON number, boolean, null, object or array; anything else
    stays the text it was. ``coerce_args`` runs afterwards.
    """
    raw = raw[2:] if raw.startswith("\r\n") else raw.removeprefix("\n")
    raw = raw[:-2] if raw.endswith("\r\n") else raw.removesuffix("\n")
    if isinstance(schema, dict) and "string" in _types(schema):
        return raw
    try:
        value = json.loads(raw.strip(), parse_constant=_no_constants) if raw.strip() else raw
    except (ValueError, RecursionError):
        return raw
    return raw if isinstance(value, str) else value


# --- decoded JSON values as calls -----------------------------------------------------------


@dataclass
class Found:
    """What a reply (or part of it) was read as."""

    format: str
    calls: list[dict]
    content: str = ""
    preamble: str = ""
    repaired: bool = False


class Reject(Exception):
    """This candidate is not a usable message; other candidates may still be."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def bracket_walk(text: str, start: int, limit: int, *, stop_at_close: bool) -> tuple[int, bool]:
    """Walk ``[]{}`` outside double-quoted strings: (index after the close or -1, too deep)."""
    depth, in_string, skip = 0, False, -1
    for match in _BRACKETS.finditer(text, start, limit):
        index, char = match.start(), match.group()
        if index < skip:
            continue
        if in_string:
            skip = index + 2 if char == "\\" else skip
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > _MAX_NESTING:
                return -1, True
        elif char in "]}":
            depth -= 1
            if depth <= 0 and stop_at_close:
                return index + 1, False
    return -1, False


class CallReader:
    """Reads decoded JSON values as tool calls or an envelope, for one reply.

    It holds the tools (for names that need them) and the reply's json_repair budget.
    """

    def __init__(self, tools: dict[str, dict]) -> None:
        self.tools = tools
        self.repairs_left = _MAX_REPAIRS
        self.repair_chars_left = _MAX_REPAIR_TOTAL

    def properties(self, name: str) -> dict:
        props = self.tools.get(name, {}).get("parameters", {}).get("properties")
        return props if isinstance(props, dict) else {}

    def known(self, name: str) -> bool:
        try:
            return bool(self.tools) and bool(resolve_tool_name(name, self.tools))
        except ParseError:
            return False

    def repair(self, span: str) -> Any:
        """json_repair on a bounded, not too deeply nested span; None when nothing came out."""
        span = span.strip().rstrip("`").rstrip()
        if not span or len(span) > min(_MAX_REPAIR_CHARS, self.repair_chars_left):
            return None
        if self.repairs_left <= 0 or bracket_walk(span, 0, len(span), stop_at_close=False)[1]:
            return None
        self.repairs_left -= 1
        self.repair_chars_left -= len(span)
        try:
            value = repair_json(span, return_objects=True, skip_json_loads=True)
        except Exception:  # whatever goes wrong inside json_repair means "no value"
            return None
        return value if isinstance(value, dict | list) and value else None

    def first_value(self, text: str) -> tuple[Any, bool]:
        """The JSON value at the start of ``text``, strict or else repaired: (value, repaired)."""
        start = _SEPARATORS.match(text).end()  # type: ignore[union-attr]
        if text[start : start + 1] not in ("{", "["):
            return None, False
        try:
            return _DECODER.raw_decode(text, start)[0], False
        except (ValueError, RecursionError):
            value = self.repair(text[start:])
            return value, value is not None

    def sequence(self, text: str, pos: int, *, repair: bool) -> tuple[list, int, bool]:
        """Calls in JSON values one after another from ``pos``: (calls, end, repaired)."""
        calls: list[dict] = []
        repaired = False
        while len(calls) <= _MAX_CALLS:
            start = _SEPARATORS.match(text, pos).end()  # type: ignore[union-attr]
            if text[start : start + 1] not in ("{", "["):
                break
            try:
                value, end = _DECODER.raw_decode(text, start)
                fixed = False
            except (ValueError, RecursionError):
                if not repair:
                    break
                value, end, fixed = self.repair(text[start:]), len(text), True
            try:
                found = self.shape(value, fixed) if value is not None else None
            except Reject:
                found = None
            if found is None or not found.calls:
                break
            calls.extend(found.calls)
            pos, repaired = end, repaired or fixed
        return calls, pos, repaired

    def named_call(self, segment: str, marker: str) -> tuple[list[dict], bool]:
        """Mistral ``name[ARGS]{...}`` / ``name{...}``, or Llama ``<|python_tag|>f(a=1)``."""
        if marker == "<|python_tag|>":
            calls = pythonic_calls(segment, self.tools) or []
            for call in calls:  # Llama 3.1 built-in tools: brave_search.call(query="...")
                if call["name"].endswith(".call") and not self.known(call["name"]):
                    call["name"] = call["name"][: -len(".call")]
            return calls, False
        if "[ARGS]" in segment:
            head, _, tail = segment.partition("[ARGS]")
        else:
            brace = segment.find("{")
            head, tail = (segment[:brace], segment[brace:]) if brace > 0 else ("", "")
        name = head.split("[CALL_ID]")[0].strip()
        if not name or len(name) > 200 or any(char.isspace() for char in name):
            return [], False
        value, fixed = self.first_value(tail)
        if not isinstance(value, dict):
            return [], False
        args, repaired = self.arguments(value, name)
        return [{"id": None, "name": name, "args": args}], fixed or repaired

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
            raise Reject("the JSON envelope has neither content nor tool_calls")
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
        try:
            return decode_arguments(raw, self.repair)
        except ValueError as exc:
            raise Reject(f"the arguments of {name!r} are not usable: {exc}") from None


# --- pythonic calls: [f(a=1), g(b="x")] -----------------------------------------------------


def pythonic_calls(source: str, tools: dict[str, dict]) -> list[dict] | None:
    """Calls from ``[f(a=1), g(b="x")]`` or ``f(a=1)`` read with ast; None if not exactly that.

    Values must be literals (``ast.literal_eval`` on each value node: names, calls and
    attribute access make the text not a call list). Positional values follow the parameter
    order of the tool's schema, so they need ``tools``.
    """
    if len(source) > _MAX_PYTHONIC_CHARS or "(" not in source:
        return None
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    nodes = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    if not nodes or not all(isinstance(item, ast.Call) for item in nodes):
        return None
    calls = [_ast_call(item, tools) for item in nodes]
    return None if any(call is None for call in calls) else calls  # type: ignore[return-value]


def _ast_call(node: ast.Call, tools: dict[str, dict]) -> dict | None:
    parts, func = [], node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None  # a call or subscript where a (dotted) name belongs
    name = ".".join([func.id, *reversed(parts)])
    pairs: list[tuple[str, ast.AST]] = []
    if node.args:
        try:
            tool = tools[resolve_tool_name(name, tools)] if tools else {}
        except ParseError:
            tool = {}
        props = (tool.get("parameters") or {}).get("properties") or {}
        if len(node.args) > len(props):
            return None
        pairs = list(zip(props, node.args, strict=False))
    for keyword in node.keywords:
        if keyword.arg is None or keyword.arg in dict(pairs):
            return None
        pairs.append((keyword.arg, keyword.value))
    args = {}
    for key, value_node in pairs:
        try:
            args[key] = _jsonable(ast.literal_eval(value_node), 0)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return {"id": None, "name": name, "args": args}


def _jsonable(value: Any, depth: int) -> Any:
    """``value`` as JSON data (tuples become lists); ValueError for anything else."""
    if depth > _MAX_NESTING:
        raise ValueError("too deeply nested")
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(item, depth + 1) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _jsonable(item, depth + 1) for key, item in value.items()}
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def _paren_end(text: str, open_index: int, limit: int) -> int:
    """Index after the ``)`` closing the first ``(`` from ``open_index``, skipping strings."""
    depth, quote, skip = 0, "", -1
    for match in _PARENS.finditer(text, open_index, limit):
        index, char = match.start(), match.group()
        if index < skip:
            continue
        if quote:
            skip = index + 2 if char == "\\" else skip
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "()":
            depth += 1 if char == "(" else -1
            if depth == 0:
                return index + 1
    return -1


def embedded_pythonic(text: str, tools: dict[str, dict]) -> list[tuple[int, int, dict]]:
    """``(start, end, call)`` for calls of known tools written as ``name(key=value)`` in prose."""
    spans: list[tuple[int, int, dict]] = []
    scans = 0
    for name in tools:
        pos = 0
        while scans < _MAX_PYTHONIC_SCANS:
            start = text.find(name + "(", pos)
            if start == -1:
                break
            scans, pos = scans + 1, start + 1
            if start and (text[start - 1].isalnum() or text[start - 1] in "_."):
                continue
            end = _paren_end(text, start + len(name), min(len(text), start + _MAX_PYTHONIC_CHARS))
            calls = pythonic_calls(text[start:end], tools) if end != -1 else None
            if calls:
                spans.append((start, end, calls[0]))
                pos = end
    kept: list[tuple[int, int, dict]] = []
    for span in sorted(spans, key=lambda span: span[0]):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept
