"""The JSON Schema of the reply envelope, built from tools_schema, for constrained decoding.

A reply is either ``{"content": str}`` or ``{"tool_calls": [call, ...]}`` with at least one
call, where each call is ``{"name": <const tool name>, "args": <that tool's parameters>}``.
Content and calls are exclusive by construction, names can only be real ones, arguments
match their schema, and every string and array is bounded so that a tiny model cannot loop
until ``max_new_tokens``. Backends compile this schema to their grammar and cache it.

**The bounds fit the token budget.** Given ``max_new_tokens``, ``reply_schema`` derives the
bounds (string lengths, items, calls or plan steps, answer length) so that the *longest*
reply the grammar allows fits in it: the longest instance is written out (every optional
property present, every array full, every string at its ``maxLength``, numbers at their
widest) and its tokens are estimated as one token per digit (tokenizers such as SmolLM2's
split numbers into digits) and one token per ``CHARS_PER_TOKEN`` = 2 other characters
(keys, punctuation, names, free text: English BPE averages about 4 characters per token on
prose and 3 on JSON, so 2 leaves a factor of 1.5 to 2 of headroom), plus ``RESERVE_TOKENS``.
The profile's ``max_string_length`` / ``max_content_length`` / ``max_calls`` are upper
limits: the call count is lowered first, then the strings, never below ``MIN_STRING`` (16
characters, a path or a name). A reply that is cut off anyway (a tool whose skeleton alone
does not fit, or text at fewer than 2 characters per token) is reported as cut off by the
decision, never repaired into a call.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from lokal.config import ToolCallingSettings
from lokal.tools.schema import ToolSpec

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_NUMBER",
    "MIN_STRING",
    "PROPERTY_ORDER",
    "RESERVE_TOKENS",
    "bounded_schema",
    "estimate_tokens",
    "fit_schema",
    "longest_text",
    "reply_schema",
    "schema_key",
]

MAX_NUMBER = 10**12  # the bound put on numbers that have none (at most 13 digits)
CHARS_PER_TOKEN = 2.0  # characters per token of non-digit reply text, assumed (see above)
RESERVE_TOKENS = 4  # the end-of-sequence token and rounding
MIN_STRING = 16  # derived string bounds go no lower: fewer calls first
_FRACTION = ".999999"  # a float's fraction is not bounded by the grammar: 6 digits assumed

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
        if "items" not in out and "prefixItems" not in out:
            out["items"] = {}  # any items, made bounded scalars below
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
    settings: ToolCallingSettings | None = None,
    max_string: int | None = None,
    max_content: int | None = None,
    max_calls: int | None = None,
    require_call: bool = False,
    one_call: bool = False,
    answer_schema: dict[str, Any] | None = None,
    max_new_tokens: int | None = None,
) -> dict[str, Any]:
    """The envelope schema for ``tools``; ``plan=True`` for a plan.

    ``require_call``: no answer branch (a call is required; ignored without tools).
    ``one_call``: at most one call in the list. ``answer_schema`` (default: the
    ``answer_schema`` attribute of ``settings``, if any): the JSON Schema the answer's
    ``content`` must match, written as JSON (``{"content": {...}}``) instead of a string.
    ``max_new_tokens``: the token budget of the reply; the bounds (at most the given ones or
    the settings') are lowered until the longest reply fits it (see the module's text).
    """
    max_string = max_string or getattr(settings, "max_string_length", 128)
    max_content = max_content or getattr(settings, "max_content_length", 512)
    max_calls = max_calls or getattr(settings, "max_calls", 4)
    if answer_schema is None and settings is not None:
        answer_schema = settings.answer_schema
    if max_new_tokens is not None:
        max_string, max_content, max_calls = fit_bounds(
            tools,
            max_new_tokens,
            plan=plan,
            max_string=max_string,
            max_content=max_content,
            max_calls=1 if one_call and not plan else max_calls,
            answer_schema=answer_schema,
        )
    return _envelope(
        tools,
        plan=plan,
        max_string=max_string,
        max_content=max_content,
        max_calls=max_calls,
        require_call=require_call,
        one_call=one_call,
        answer_schema=answer_schema,
    )


def _answer_branch(
    answer_schema: dict[str, Any] | None, max_content: int, max_calls: int
) -> dict[str, Any]:
    if answer_schema is None:
        content: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": max_content}
    else:
        content = bounded_schema(answer_schema, max_string=max_content, max_items=max_calls)
    return {
        "type": "object",
        "properties": {"content": content},
        "required": ["content"],
        "additionalProperties": False,
    }


def _envelope(
    tools: list[ToolSpec],
    *,
    plan: bool,
    max_string: int,
    max_content: int,
    max_calls: int,
    require_call: bool,
    one_call: bool,
    answer_schema: dict[str, Any] | None,
) -> dict[str, Any]:
    answer = _answer_branch(answer_schema, max_content, max_calls)
    if not tools:
        return answer
    body = _call_branch(
        tools, plan=plan, max_string=max_string, max_calls=max_calls, one_call=one_call
    )
    if require_call:
        return body
    return {"anyOf": [body, answer]}


def _call_branch(
    tools: list[ToolSpec], *, plan: bool, max_string: int, max_calls: int, one_call: bool
) -> dict[str, Any]:
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
        return {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string", "maxLength": max_string},
                "plan": {"type": "array", "items": step, "minItems": 1, "maxItems": max_calls},
            },
            "required": ["reasoning", "plan"],
            "additionalProperties": False,
        }
    return {
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


# -- the longest reply a schema allows, and its tokens ------------------------------------


def estimate_tokens(text: str) -> float:
    """The tokens ``text`` is assumed to take at most: one per digit, one per
    ``CHARS_PER_TOKEN`` other characters."""
    digits = sum(c.isdigit() for c in text)
    return digits + (len(text) - digits) / CHARS_PER_TOKEN


def _widest_number(node: dict[str, Any], integer: bool) -> str:
    low = node.get("minimum", node.get("exclusiveMinimum", -MAX_NUMBER))
    high = node.get("maximum", node.get("exclusiveMaximum", MAX_NUMBER))
    texts = [str(int(low)), str(int(high))]
    if not integer:
        # the widest float inside the bounds: the integer part one digit short of the bound
        texts = [t[:-1] + _FRACTION if len(t.lstrip("-")) > 1 else t + _FRACTION for t in texts]
    return max(texts, key=len)


def longest_text(node: Any, *, _depth: int = 0) -> str:
    """The JSON text (compact, ``", "`` and ``": "``) of the instance of a bounded schema that
    takes the most tokens by ``estimate_tokens``: every property present, every array at its
    ``maxItems``, every string at its ``maxLength`` (``x`` repeated), numbers at their widest.
    An unbounded string or array counts as ``MIN_STRING`` characters or one item."""
    if node is True or not isinstance(node, dict) or _depth > 32:
        return '""'
    if "const" in node:
        return json.dumps(node["const"], ensure_ascii=False)
    if isinstance(node.get("enum"), list) and node["enum"]:
        return max((json.dumps(v, ensure_ascii=False) for v in node["enum"]), key=estimate_tokens)
    branches = [b for key in ("anyOf", "oneOf") for b in node.get(key) or []]
    if branches:
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        texts = [longest_text({**rest, **b}, _depth=_depth + 1) for b in branches]
        return max(texts, key=estimate_tokens)
    kind = node.get("type")
    if isinstance(kind, list):
        texts = [longest_text({**node, "type": k}, _depth=_depth + 1) for k in kind]
        return max(texts, key=estimate_tokens) if texts else '""'
    if kind == "string":
        return '"' + "x" * int(node.get("maxLength", MIN_STRING)) + '"'
    if kind == "integer":
        return _widest_number(node, integer=True)
    if kind == "number":
        return _widest_number(node, integer=False)
    if kind == "boolean":
        return "false"
    if kind == "null":
        return "null"
    if kind == "array":
        count = int(node.get("maxItems", 1))
        item = longest_text(node.get("items", {}), _depth=_depth + 1)
        return "[" + ", ".join([item] * count) + "]"
    if kind == "object" or "properties" in node:
        parts = [
            json.dumps(key, ensure_ascii=False) + ": " + longest_text(spec, _depth=_depth + 1)
            for key, spec in (node.get("properties") or {}).items()
        ]
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            value = longest_text(extra, _depth=_depth + 1)
            width = int(extra.get("maxLength", MIN_STRING))  # keys as long as the values
            for i in range(int(node.get("maxProperties", 1))):
                key = json.dumps(f"k{i}".ljust(width, "x"))
                parts.append(f"{key}: {value}")
        return "{" + ", ".join(parts) + "}"
    return '""'


def _fits(schema: dict[str, Any], budget: float) -> bool:
    return estimate_tokens(longest_text(schema)) <= budget


def _largest(lo: int, hi: int, fits: Any) -> int | None:
    """The largest n in [lo, hi] with fits(n) (fits is monotone), or None."""
    if hi < lo or not fits(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_bounds(
    tools: list[ToolSpec],
    max_new_tokens: int,
    *,
    plan: bool = False,
    max_string: int = 128,
    max_content: int = 512,
    max_calls: int = 4,
    answer_schema: dict[str, Any] | None = None,
) -> tuple[int, int, int]:
    """``(max_string, max_content, max_calls)``, each at most the given one, such that the
    longest reply of each branch fits ``max_new_tokens`` (see the module's text). When even
    one call with ``MIN_STRING`` strings does not fit, those floor bounds are returned (such a
    reply may be cut off, and is then reported as cut off)."""
    budget = max_new_tokens - RESERVE_TOKENS
    floor = min(MIN_STRING, max_string)
    content = _largest(
        min(MIN_STRING, max_content),
        max_content,
        lambda n: _fits(_answer_branch(answer_schema, n, max_calls), budget),
    )
    content = content or min(MIN_STRING, max_content)
    if not tools:
        return max_string, content, max_calls
    for calls in range(max_calls, 0, -1):

        def branch(n: int, calls: int = calls) -> dict[str, Any]:
            return _call_branch(tools, plan=plan, max_string=n, max_calls=calls, one_call=False)

        string = _largest(floor, max_string, lambda n, b=branch: _fits(b(n), budget))
        if string is not None:
            return string, content, calls
    return floor, content, 1


def fit_schema(
    schema: dict[str, Any], max_new_tokens: int, *, max_string: int, max_items: int
) -> dict[str, Any]:
    """``bounded_schema(schema)`` with the largest bounds (at most ``max_string`` and
    ``max_items``; items lowered first, strings not below ``MIN_STRING``) whose longest
    instance fits ``max_new_tokens``: a value generated on its own (staged arguments)."""
    budget = max_new_tokens - RESERVE_TOKENS
    floor = min(MIN_STRING, max_string)
    for items in range(max_items, 0, -1):
        string = _largest(
            floor,
            max_string,
            lambda n, i=items: _fits(bounded_schema(schema, max_string=n, max_items=i), budget),
        )
        if string is not None:
            return bounded_schema(schema, max_string=string, max_items=items)
    return bounded_schema(schema, max_string=floor, max_items=1)


def schema_key(schema: dict[str, Any]) -> str:
    """A stable cache key for a schema (compiled grammars are cached by it)."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))
