"""tools_schema normalization: OpenAI form and flat form in, one flat form out.

OpenAI form: ``{"type": "function", "function": {"name", "description", "parameters"}}``.
Flat form: ``{"name", "description", "parameters"}``. BFCL's types (``dict``, ``float``,
``tuple``, ``any``) are mapped to JSON Schema so that one validator reads them all.
"""

from __future__ import annotations

import copy
from typing import Any

from lokal.errors import ConfigError

__all__ = ["json_schema_type", "normalize_tools_schema", "to_openai_tools", "tools_by_name"]

# BFCL and hand-written schemas use Python-ish type names; JSON Schema has its own.
_TYPE_ALIASES: dict[str, str | None] = {
    "dict": "object",
    "object": "object",
    "float": "number",
    "double": "number",
    "number": "number",
    "int": "integer",
    "integer": "integer",
    "long": "integer",
    "str": "string",
    "string": "string",
    "bool": "boolean",
    "boolean": "boolean",
    "tuple": "array",
    "list": "array",
    "array": "array",
    "null": "null",
    "none": "null",
    "any": None,  # no constraint
}

_SCHEMA_CHILDREN = ("items", "additionalProperties", "not")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def json_schema_type(name: str) -> str | None:
    """The JSON Schema type for a type name such as ``dict`` or ``float``; None for ``any``."""
    key = name.strip().lower()
    if key not in _TYPE_ALIASES:
        raise ConfigError(
            f"unknown parameter type {name!r}; use one of {sorted(k for k in _TYPE_ALIASES)}"
        )
    return _TYPE_ALIASES[key]


def _normalize_node(node: Any, where: str) -> Any:
    """A copy of a schema node with every type name mapped to JSON Schema."""
    if not isinstance(node, dict):
        return node
    out = dict(node)
    declared = out.get("type")
    if isinstance(declared, str):
        mapped = json_schema_type(declared)
        if mapped is None:
            out.pop("type")
        else:
            out["type"] = mapped
    elif isinstance(declared, list):
        mapped_list = [json_schema_type(t) for t in declared if isinstance(t, str)]
        if None in mapped_list:
            out.pop("type")
        else:
            out["type"] = mapped_list
    if isinstance(out.get("properties"), dict):
        out["properties"] = {
            key: _normalize_node(value, f"{where}.{key}")
            for key, value in out["properties"].items()
        }
    for key in _SCHEMA_CHILDREN:
        if isinstance(out.get(key), dict):
            out[key] = _normalize_node(out[key], f"{where}.{key}")
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_normalize_node(item, f"{where}.{key}") for item in out[key]]
    if "required" in out and not isinstance(out["required"], list):
        raise ConfigError(f"{where}.required must be a list of parameter names")
    return out


def _normalize_tool(tool: Any, index: int) -> dict[str, Any]:
    if not isinstance(tool, dict):
        raise ConfigError(f"tools_schema[{index}] must be an object, got {type(tool).__name__}")
    body = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"tools_schema[{index}] has no name")
    parameters = body.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise ConfigError(f"tools_schema[{index}] ({name}): parameters must be an object")
    parameters = _normalize_node(copy.deepcopy(parameters), name)
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    return {
        "name": name,
        "description": str(body.get("description") or ""),
        "parameters": parameters,
    }


def normalize_tools_schema(tools: Any) -> list[dict[str, Any]]:
    """Flat-form copies of ``tools`` (a list in OpenAI or flat form, or None)."""
    if tools is None:
        return []
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        raise ConfigError(f"tools_schema must be a list of tools, got {type(tools).__name__}")
    normalized = [_normalize_tool(tool, index) for index, tool in enumerate(tools)]
    names = [tool["name"] for tool in normalized]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"tools_schema names a tool twice: {', '.join(duplicates)}")
    return normalized


def to_openai_tools(tools: Any) -> list[dict[str, Any]]:
    """``tools`` in OpenAI form, as chat templates and OpenAI-compatible servers expect."""
    return [{"type": "function", "function": tool} for tool in normalize_tools_schema(tools)]


def tools_by_name(tools: Any) -> dict[str, dict[str, Any]]:
    """Normalized tools keyed by name."""
    return {tool["name"]: tool for tool in normalize_tools_schema(tools)}
