"""Python function → tool JSON schema.

``function_to_schema(func)`` reads the signature, the type hints and the docstring and returns
the flat form ``{"name", "description", "parameters"}`` where ``parameters`` is a JSON Schema
(Draft 2020-12) object. Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``,
``Any``, ``list[X]``/``tuple[X, ...]``/``set[X]``, ``dict[str, X]``, ``Literal[...]`` and
``Enum`` subclasses (→ ``enum``), ``Optional[X]``/``X | None``, other unions (→ ``anyOf``),
``Annotated[X, "description"]`` and pydantic models (anything with ``model_json_schema``;
pydantic is never imported here). A parameter with a default is not required and its default
is recorded when it is JSON-serialisable.

Docstrings may be in Google style (``Args:``), reST/Sphinx style (``:param x: ...``) or NumPy
style (``Parameters`` + dashes). The text before the first section is the tool's description,
the per-parameter text goes into each property's ``description``.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ParsedDocstring", "annotation_to_schema", "function_to_schema", "parse_docstring"]

# --- docstrings ---------------------------------------------------------------------------

_GOOGLE_PARAM_HEADERS = {"args", "arguments", "parameters", "params", "keyword args", "kwargs"}
_GOOGLE_OTHER_HEADERS = {
    "returns",
    "return",
    "yields",
    "raises",
    "example",
    "examples",
    "note",
    "notes",
    "see also",
    "warning",
    "warnings",
    "attributes",
    "todo",
    "references",
}
_GOOGLE_HEADER_RE = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY_RE = re.compile(r"^\*{0,2}(\w+)\s*(?:[(（]([^)）]*)[)）])?\s*[:：]\s*(.*)$")
_REST_FIELD_RE = re.compile(r"^:(\w+)(?:\s+([^:]+?))?\s*:\s*(.*)$")
_NUMPY_UNDERLINE_RE = re.compile(r"^-{3,}\s*$")
_NUMPY_ENTRY_RE = re.compile(r"^\*{0,2}(\w+)\s*(?::\s*(.*))?$")


@dataclass
class ParsedDocstring:
    """What ``parse_docstring`` found: the description and one text per parameter name."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)
    returns: str = ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(lines: list[str]) -> str:
    """Join wrapped lines into one paragraph-preserving text."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(p) for p in paragraphs if p)


def _collect_block(lines: list[str], start: int, base_indent: int) -> tuple[list[str], int]:
    """Lines from ``start`` that are blank or indented deeper than ``base_indent``."""
    block: list[str] = []
    index = start
    while index < len(lines):
        line = lines[index]
        if line.strip() and _indent(line) <= base_indent:
            break
        block.append(line)
        index += 1
    while block and not block[-1].strip():
        block.pop()
    return block, index


def _parse_entries(block: list[str], entry_re: re.Pattern[str]) -> dict[str, str]:
    """Entries ``name: text`` (with indented continuations) inside a parameter section."""
    entries: dict[str, list[str]] = {}
    non_blank = [line for line in block if line.strip()]
    if not non_blank:
        return {}
    entry_indent = min(_indent(line) for line in non_blank)
    current: str | None = None
    for line in block:
        if line.strip() and _indent(line) == entry_indent:
            match = entry_re.match(line.strip())
            if match:
                current = match.group(1)
                entries[current] = [match.group(3)] if entry_re is _GOOGLE_ENTRY_RE else []
                continue
            current = None
        elif current is not None:
            entries[current].append(line)
    return {name: _join(text) for name, text in entries.items()}


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a Google, reST or NumPy docstring into description, parameter texts and returns."""
    result = ParsedDocstring()
    if not doc:
        return result
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    index = 0
    in_description = True
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        header = _GOOGLE_HEADER_RE.match(stripped)
        rest = _REST_FIELD_RE.match(stripped)
        numpy_header = (
            index + 1 < len(lines)
            and _NUMPY_UNDERLINE_RE.match(lines[index + 1].strip())
            and stripped.lower()
            in _GOOGLE_PARAM_HEADERS | _GOOGLE_OTHER_HEADERS | {"other parameters"}
        )
        if numpy_header:
            in_description = False
            block, next_index = _collect_numpy_block(lines, index + 2)
            if stripped.lower() in _GOOGLE_PARAM_HEADERS | {"other parameters"}:
                result.params.update(_parse_entries(block, _NUMPY_ENTRY_RE))
            elif stripped.lower() in {"returns", "return", "yields"}:
                result.returns = _join(block)
            index = next_index
            continue
        if header and header.group(1).lower() in _GOOGLE_PARAM_HEADERS | _GOOGLE_OTHER_HEADERS:
            in_description = False
            name = header.group(1).lower()
            block, index = _collect_block(lines, index + 1, _indent(line))
            if name in _GOOGLE_PARAM_HEADERS:
                result.params.update(_parse_entries(block, _GOOGLE_ENTRY_RE))
            elif name in {"returns", "return", "yields"}:
                result.returns = _join(block)
            continue
        if rest:
            in_description = False
            kind, target, text = rest.group(1), rest.group(2), rest.group(3)
            block, index = _collect_block(lines, index + 1, _indent(line))
            full = _join([text, *block])
            if kind in {"param", "parameter", "arg", "argument", "key", "keyword"} and target:
                result.params[target.split()[-1]] = full
            elif kind in {"return", "returns"}:
                result.returns = full
            continue
        if in_description:
            description.append(line)
        index += 1
    result.description = _join(description)
    return result


def _collect_numpy_block(lines: list[str], start: int) -> tuple[list[str], int]:
    """Lines of a NumPy section: up to the next ``Header`` + dashes pair."""
    index = start
    block: list[str] = []
    while index < len(lines):
        if index + 1 < len(lines) and _NUMPY_UNDERLINE_RE.match(lines[index + 1].strip()):
            break
        block.append(lines[index])
        index += 1
    while block and not block[-1].strip():
        block.pop()
    return block, index


# --- type hints → JSON Schema ---------------------------------------------------------------

_SIMPLE_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    bytes: "string",
    type(None): "null",
}


def _is_model(tp: Any) -> bool:
    """True for pydantic models (checked by duck typing; pydantic is not imported)."""
    return inspect.isclass(tp) and callable(getattr(tp, "model_json_schema", None))


def annotation_to_schema(tp: Any, defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON Schema of a type hint. Pydantic ``$defs`` are merged into ``defs``."""
    defs = {} if defs is None else defs
    if tp is inspect.Parameter.empty or tp is Any or tp is object:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if tp in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[tp]}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        schema = annotation_to_schema(args[0], defs)
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema = {**schema, "description": " ".join(notes)}
        for meta in args[1:]:
            schema = _constrained(schema, meta)
        return schema
    if origin is typing.Literal:
        values = list(args)
        schema: dict[str, Any] = {"enum": values}
        kinds = {_SIMPLE_TYPES.get(type(v)) for v in values}
        if len(kinds) == 1 and None not in kinds:
            schema = {"type": kinds.pop(), "enum": values}
        return schema
    if origin in (typing.Union, types.UnionType):
        return _union_schema(args, defs)
    if inspect.isclass(tp) and issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
        return annotation_to_schema(typing.Literal[tuple(values)], defs)  # type: ignore[misc]
    if _is_model(tp):
        return _model_schema(tp, defs)
    if origin in (list, set, frozenset, Sequence) or tp in (list, set, frozenset, Sequence):
        schema = {"type": "array"}
        if args:
            schema["items"] = annotation_to_schema(args[0], defs)
        return schema
    if origin is tuple or tp is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            items = annotation_to_schema(args[0], defs) if args else {}
            return {"type": "array", **({"items": items} if items else {})}
        return {
            "type": "array",
            "prefixItems": [annotation_to_schema(a, defs) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = annotation_to_schema(args[1], defs)
        return schema
    if inspect.isclass(tp) and typing.is_typeddict(tp):
        return _typeddict_schema(tp, defs)
    # Path, datetime and other scalar-ish classes travel as strings.
    return {"type": "string", "description": f"a {getattr(tp, '__name__', tp)} as text"}


# annotated_types / pydantic constraint attributes -> JSON Schema keywords
_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _constrained(schema: dict[str, Any], meta: Any) -> dict[str, Any]:
    """``schema`` with the bounds of one ``Annotated`` item (``annotated_types.Ge(1)``,
    ``Interval(ge=1, le=10)``, ``MaxLen(64)``, a pydantic ``Field(ge=1)``…)."""
    if isinstance(meta, str):
        return schema
    out = dict(schema)
    for item in [meta, *(getattr(meta, "metadata", None) or [])]:
        for attribute, keyword in _BOUNDS.items():
            value = getattr(item, attribute, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[keyword] = value
        for attribute, suffix in (("min_length", "min"), ("max_length", "max")):
            value = getattr(item, attribute, None)
            if isinstance(value, int) and not isinstance(value, bool):
                key = "Items" if out.get("type") == "array" else "Length"
                out[suffix + key] = value
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            out["pattern"] = pattern
    description = getattr(meta, "description", None)
    if isinstance(description, str) and description:
        out["description"] = description
    return out


def _union_schema(args: tuple[Any, ...], defs: dict[str, Any]) -> dict[str, Any]:
    members = [annotation_to_schema(a, defs) for a in args]
    simple = all(set(m) == {"type"} and isinstance(m["type"], str) for m in members)
    if simple:
        kinds: list[str] = []
        for member in members:
            if member["type"] not in kinds:
                kinds.append(member["type"])
        return {"type": kinds[0] if len(kinds) == 1 else kinds}
    return {"anyOf": members}


def _model_schema(model: Any, defs: dict[str, Any]) -> dict[str, Any]:
    schema = dict(model.model_json_schema())
    defs.update(schema.pop("$defs", {}))
    return schema


def _typeddict_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(tp, include_extras=True)
    return {
        "type": "object",
        "properties": {name: annotation_to_schema(hint, defs) for name, hint in hints.items()},
        "required": sorted(getattr(tp, "__required_keys__", hints)),
    }


def _json_default(value: Any) -> tuple[bool, Any]:
    """``(True, value)`` when a default can be written into the schema."""
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False, None
    return True, value


def _resolve_hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        return dict(getattr(func, "__annotations__", {}))


def function_to_schema(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """The flat tool schema ``{"name", "description", "parameters"}`` of ``func``.

    ``*args`` and ``**kwargs`` are left out; ``**kwargs`` allows extra properties.
    """
    target = inspect.unwrap(func)
    signature = inspect.signature(target)
    hints = _resolve_hints(target)
    doc = parse_docstring(inspect.getdoc(target))
    defs: dict[str, Any] = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra_allowed = False
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra_allowed = True
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL or param.name in ("self", "cls"):
            continue
        schema = dict(annotation_to_schema(hints.get(param.name, param.annotation), defs))
        text = doc.params.get(param.name)
        if text and "description" not in schema:
            schema["description"] = text
        elif text:
            schema["description"] = f"{text} ({schema['description']})"
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            ok, value = _json_default(param.default)
            if ok:
                schema["default"] = value
        properties[param.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if not extra_allowed:
        parameters["additionalProperties"] = False
    if defs:
        parameters["$defs"] = defs
    return {
        "name": name or target.__name__,
        "description": description if description is not None else doc.description,
        "parameters": parameters,
    }
