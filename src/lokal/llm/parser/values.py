"""JSON values in text and their repair, argument decoding, and coercion to schema types.

``find_json`` reads every JSON object or array in a text: strict values first (the whole text,
then ``raw_decode`` from each bracket), and only where strict JSON failed a bounded
``json_repair`` of almost-JSON (``Repairer`` holds one reply's budget). Argument strings are
decoded by the one decoder, ``decode_arguments`` (``lokal.messages``). ``coerce_args``
converts values to a schema's types where nothing is lost.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from json_repair import repair_json

from lokal.errors import ConfigError
from lokal.llm.parser.limits import (
    MAX_COERCE_DEPTH,
    MAX_DECODE_STARTS,
    MAX_REPAIR_CHARS,
    MAX_REPAIR_TOTAL,
    MAX_REPAIRS,
)
from lokal.llm.parser.text import BRACE, bracket_walk, fence_bodies
from lokal.messages import decode_arguments
from lokal.tools.schema import json_schema_type

__all__ = [
    "DECODER",
    "SEPARATORS",
    "Cand",
    "Repairer",
    "coerce_args",
    "decode_arguments",
    "extract_json_values",
    "find_json",
    "first_value",
    "xml_value",
]

DECODER = json.JSONDecoder()
SEPARATORS = re.compile(r"[\s;,]*")  # between JSON values one after another


class Repairer:
    """One reply's bounded use of json_repair: so many calls, so many characters."""

    def __init__(self) -> None:
        self.repairs_left = MAX_REPAIRS
        self.repair_chars_left = MAX_REPAIR_TOTAL

    def repair(self, span: str) -> Any:
        """json_repair on a bounded, not too deeply nested span; None when nothing came out."""
        span = span.strip().rstrip("`").rstrip()
        if not span or len(span) > min(MAX_REPAIR_CHARS, self.repair_chars_left):
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


# --- JSON values in text --------------------------------------------------------------------


@dataclass
class Cand:
    """A JSON value found in a text, where it stands, and whether it was repaired."""

    value: Any
    repaired: bool
    start: int
    end: int
    nested: bool = False  # a strict value inside a repaired one


def extract_json_values(text: str) -> list[tuple[object, bool]]:
    """Every JSON object or array in ``text``, in order of appearance, with a repaired flag.

    Looks at the whole text, markdown fences, objects embedded in prose (also followed by stray
    backticks) and, where strict JSON fails, a bounded repair of almost-JSON.
    """
    if not isinstance(text, str):
        return []
    try:
        return [(cand.value, cand.repaired) for cand in find_json(text, Repairer())]
    except (RecursionError, MemoryError):
        return []


def first_value(text: str, repairer: Repairer) -> tuple[Any, bool]:
    """The JSON value at the start of ``text``, strict or else repaired: (value, repaired)."""
    start = SEPARATORS.match(text).end()  # type: ignore[union-attr]
    if text[start : start + 1] not in ("{", "["):
        return None, False
    try:
        return DECODER.raw_decode(text, start)[0], False
    except (ValueError, RecursionError):
        value = repairer.repair(text[start:])
        return value, value is not None


def find_json(text: str, repairer: Repairer) -> list[Cand]:
    """The JSON objects and arrays in ``text``, strict and repaired, in order of appearance."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            if isinstance(value, dict | list):
                start = text.find(stripped[0])
                return [Cand(value, False, start, start + len(stripped))]
    found: list[Cand] = []
    failed: list[int] = []
    pos = 0
    for _ in range(MAX_DECODE_STARTS):
        match = BRACE.search(text, pos)
        if match is None:
            break
        try:
            value, end = DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            failed.append(match.start())
            pos = match.start() + 1
            continue
        found.append(Cand(value, False, match.start(), end))
        pos = end
    fences = fence_bodies(text) if failed else []
    repaired_until = -1
    for start in failed:
        if start < repaired_until or repairer.repairs_left <= 0:
            continue
        fence_end = next((end for begin, end in fences if begin <= start < end), len(text))
        limit = min(fence_end, start + MAX_REPAIR_CHARS)
        end, too_deep = bracket_walk(text, start, limit, stop_at_close=True)
        if too_deep or (end == -1 and limit < fence_end):
            continue  # too deep for json_repair, or longer than the span it may be given
        end = limit if end == -1 else end
        value = repairer.repair(text[start:end])
        if value is None:
            continue
        found.append(Cand(value, True, start, end))
        repaired_until = end
        for cand in found:
            cand.nested = cand.nested or (not cand.repaired and start < cand.start < end)
    return sorted(found, key=lambda cand: cand.start)


# --- lossless coercion to schema types ------------------------------------------------------


def schema_types(schema: dict[str, Any]) -> set[str]:
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
    if not isinstance(schema, dict) or depth > MAX_COERCE_DEPTH:
        return value
    types = schema_types(schema)
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
    if isinstance(schema, dict) and "string" in schema_types(schema):
        return raw
    try:
        value = json.loads(raw.strip(), parse_constant=_no_constants) if raw.strip() else raw
    except (ValueError, RecursionError):
        return raw
    return raw if isinstance(value, str) else value
