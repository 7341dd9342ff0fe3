"""The JSON Schema of the reply envelope, built from tools_schema, for constrained decoding.

A reply is either ``{"content": str}`` or ``{"tool_calls": [call, ...]}`` with at least one
call, where each call is ``{"name": <const tool name>, "args": <that tool's parameters>}``.
Content and calls are exclusive by construction, names can only be real ones, arguments
match their schema, and every string and array is bounded so that a tiny model cannot loop
until ``max_new_tokens``. Backends compile this schema to their grammar and cache it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from lokal.tools.schema import ToolSpec

__all__ = ["MAX_NUMBER", "PROPERTY_ORDER", "bounded_schema", "reply_schema", "schema_key"]

MAX_NUMBER = 10**12  # the bound put on numbers that have none (at most 13 digits)

# Grammar converters order object keys; the envelope's keys come in this order, so that a
# model names the tool before it writes the arguments, and plans reason before listing steps.
PROPERTY_ORDER = {
    "content": 0,
    "tool_calls": 0,
    "reasoning": 0,
    "plan": 1,
    "step": 0,
    "description": 1,
    "tool_call": 2,
    "name": 0,
    "args": 1,
}


def bounded_schema(node: Any, *, max_string: int, max_items: int) -> Any:
    """A copy of a JSON Schema node with bounds on every string and array."""
    if not isinstance(node, dict):
        return node
    out = copy.copy(node)
    kind = out.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "string" in kinds and "enum" not in out and "const" not in out:
        out["maxLength"] = min(out.get("maxLength", max_string), max_string)
    if "array" in kinds:
        out["maxItems"] = min(out.get("maxItems", max_items), max_items)
    if {"integer", "number"} & set(kinds) and "enum" not in out and "const" not in out:
        # a number with no bounds lets a tiny model write digits until max_new_tokens
        out.setdefault("minimum", -MAX_NUMBER)
        out.setdefault("maximum", MAX_NUMBER)
    if kind is None and not any(k in out for k in ("anyOf", "oneOf", "allOf", "enum", "const")):
        # "any": let the grammar pick a bounded scalar rather than unbounded nesting
        out["anyOf"] = [
            {"type": "string", "maxLength": max_string},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
        ]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {
            key: bounded_schema(value, max_string=max_string, max_items=max_items)
            for key, value in out["properties"].items()
        }
        out.setdefault("additionalProperties", False)
    elif "object" in kinds and "additionalProperties" not in out:
        out["additionalProperties"] = {"type": "string", "maxLength": max_string}
        out["maxProperties"] = max_items
    if isinstance(out.get("items"), dict):
        out["items"] = bounded_schema(out["items"], max_string=max_string, max_items=max_items)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [
                bounded_schema(item, max_string=max_string, max_items=max_items)
                for item in out[key]
            ]
    out.pop("default", None)
    return out


def _call_schema(tool: ToolSpec, max_string: int, max_items: int) -> dict[str, Any]:
    params = bounded_schema(tool.parameters, max_string=max_string, max_items=max_items)
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    params.setdefault("additionalProperties", False)
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "args": params},
        "required": ["name", "args"],
        "additionalProperties": False,
    }


def reply_schema(
    tools: list[ToolSpec],
    *,
    plan: bool = False,
    settings: Any = None,
    max_string: int | None = None,
    max_content: int | None = None,
    max_calls: int | None = None,
    require_call: bool = False,
    one_call: bool = False,
    answer_schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The envelope schema for ``tools``; ``plan=True`` for a plan.

    ``require_call``: no answer branch (a call is required; ignored without tools).
    ``one_call``: at most one call in the list. ``answer_schema`` (default: the
    ``answer_schema`` attribute of ``settings``, if any): the JSON Schema the answer's
    ``content`` must match, written as JSON (``{"content": {...}}``) instead of a string.
    """
    max_string = max_string or getattr(settings, "max_string_length", 128)
    max_content = max_content or getattr(settings, "max_content_length", 512)
    max_calls = max_calls or getattr(settings, "max_calls", 4)
    if answer_schema is None and settings is not None:
        answer_schema = settings.answer_schema
    if answer_schema is None:
        content: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": max_content}
    else:
        content = bounded_schema(answer_schema, max_string=max_content, max_items=max_calls)
    answer = {
        "type": "object",
        "properties": {"content": content},
        "required": ["content"],
        "additionalProperties": False,
    }
    if not tools:
        return answer
    call = {"anyOf": [_call_schema(tool, max_string, max_calls) for tool in tools]}
    if len(tools) == 1:
        call = call["anyOf"][0]
    if plan:
        step = {
            "type": "object",
            "properties": {
                "step": {"type": "integer", "minimum": 1, "maximum": max_calls},
                "description": {"type": "string", "maxLength": max_string},
                "tool_call": call,
            },
            "required": ["step", "description", "tool_call"],
            "additionalProperties": False,
        }
        body = {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string", "maxLength": max_string},
                "plan": {"type": "array", "items": step, "minItems": 1, "maxItems": max_calls},
            },
            "required": ["reasoning", "plan"],
            "additionalProperties": False,
        }
    else:
        body = {
            "type": "object",
            "properties": {
                "tool_calls": {
                    "type": "array",
                    "items": call,
                    "minItems": 1,
                    "maxItems": 1 if one_call else max_calls,
                }
            },
            "required": ["tool_calls"],
            "additionalProperties": False,
        }
    if require_call:
        return body
    return {"anyOf": [body, answer]}


def schema_key(schema: dict[str, Any]) -> str:
    """A stable cache key for a schema (compiled grammars are cached by it)."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))
