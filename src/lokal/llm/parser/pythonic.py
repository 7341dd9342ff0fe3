"""Pythonic calls: ``[f(a=1), g(b="x")]``, ``f(a=1)`` and known tools called inside prose.

Read with ``ast``: values must be literals (``ast.literal_eval`` on each value node), so names,
calls and attribute access make a text not a call list; nothing is ever evaluated.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from typing import Any

from lokal.errors import ParseError
from lokal.llm.parser.limits import MAX_NESTING, MAX_PYTHONIC_CHARS, MAX_PYTHONIC_SCANS
from lokal.llm.parser.shapes import CallReader, Found, resolve_tool_name
from lokal.llm.parser.text import leftover, unfence
from lokal.tools.schema import ToolSpec

__all__ = ["embedded_pythonic", "pythonic_calls", "read_pythonic"]

_PARENS = re.compile(r"[()\"'\\]")


def read_pythonic(text: str, reader: CallReader) -> Found | None:
    """The whole (fence-stripped) text as a call list, or known tools called inside prose."""
    body = unfence(text)
    calls = pythonic_calls(body, reader.tools) if "(" in body else None
    if calls:
        return Found("pythonic", calls)
    spans = embedded_pythonic(text, reader.tools) if reader.tools else []
    if not spans:
        return None
    preamble = leftover(text, [(start, end) for start, end, _ in spans], strip="[],")
    return Found("pythonic", [call for _, _, call in spans], preamble=preamble)


def pythonic_calls(source: str, tools: Mapping[str, ToolSpec]) -> list[dict] | None:
    """Calls from ``[f(a=1), g(b="x")]`` or ``f(a=1)`` read with ast; None if not exactly that.

    Values must be literals (``ast.literal_eval`` on each value node: names, calls and
    attribute access make the text not a call list). Positional values follow the parameter
    order of the tool's schema, so they need ``tools``.
    """
    if len(source) > MAX_PYTHONIC_CHARS or "(" not in source:
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


def _ast_call(node: ast.Call, tools: Mapping[str, ToolSpec]) -> dict | None:
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
            spec = tools[resolve_tool_name(name, tools)] if tools else None
        except ParseError:
            spec = None
        props = spec.properties if spec is not None else {}
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
    if depth > MAX_NESTING:
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


def embedded_pythonic(text: str, tools: Mapping[str, ToolSpec]) -> list[tuple[int, int, dict]]:
    """``(start, end, call)`` for calls of known tools written as ``name(key=value)`` in prose."""
    spans: list[tuple[int, int, dict]] = []
    scans = 0
    for name in tools:
        pos = 0
        while scans < MAX_PYTHONIC_SCANS:
            start = text.find(name + "(", pos)
            if start == -1:
                break
            scans, pos = scans + 1, start + 1
            if start and (text[start - 1].isalnum() or text[start - 1] in "_."):
                continue
            end = _paren_end(text, start + len(name), min(len(text), start + MAX_PYTHONIC_CHARS))
            calls = pythonic_calls(text[start:end], tools) if end != -1 else None
            if calls:
                spans.append((start, end, calls[0]))
                pos = end
    kept: list[tuple[int, int, dict]] = []
    for span in sorted(spans, key=lambda span: span[0]):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept
