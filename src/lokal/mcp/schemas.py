"""MCP input schemas made usable by grammars and small-model prompts: every local ``$ref``
(``#/$defs/…``, ``#/definitions/…``, any JSON pointer into the schema) replaced by what it
points to, ``$defs``/``definitions`` and ``$schema``/``$id`` dropped.

A schema that refers to itself (a tree whose children are trees) cannot be inlined: it is
refused with a ConfigError naming the tool and the chain of references. So is a ``$ref`` that
points outside the schema (a URL) or to nothing. Keywords beside a ``$ref`` (allowed since
JSON Schema 2019-09) are kept, over those of the target.

A small resolver of its own rather than ``jsonref``: jsonref turns a cycle into a
self-referential structure that would still have to be found, and the error must name the tool.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import unquote

from lokal.errors import ConfigError

__all__ = ["inline_refs"]

_DEFINITIONS = ("$defs", "definitions")
_ROOT_ONLY = ("$schema", "$id")
_DATA = ("enum", "const", "default", "examples")  # values, never schemas
_NAMED = ("properties", "patternProperties", "dependentSchemas")  # name -> schema
MAX_DEPTH = 64


def _pointer(root: Any, ref: str, tool: str) -> Any:
    if not ref.startswith("#"):
        raise ConfigError(
            f"tool {tool!r}: input schema refers outside itself ($ref {ref!r}); only local "
            "references (#/...) are supported"
        )
    node = root
    path = unquote(ref[1:])
    if not path:
        return node
    if not path.startswith("/"):
        raise ConfigError(f"tool {tool!r}: unsupported $ref {ref!r} (anchors are not supported)")
    for part in path[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ConfigError(f"tool {tool!r}: $ref {ref!r} points to nothing in the schema")
    return node


def inline_refs(schema: dict[str, Any], tool: str = "tool") -> dict[str, Any]:
    """A copy of ``schema`` with every ``$ref`` inlined (see the module docstring)."""
    if not isinstance(schema, dict):
        raise ConfigError(f"tool {tool!r}: input schema must be an object")

    def walk(node: Any, chain: tuple[str, ...]) -> Any:
        if len(chain) > MAX_DEPTH:
            raise ConfigError(f"tool {tool!r}: input schema nests $ref too deeply")
        if isinstance(node, list):
            return [walk(item, chain) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in chain:
                cycle = " -> ".join([*chain[chain.index(ref) :], ref])
                raise ConfigError(
                    f"tool {tool!r}: input schema is recursive ({cycle}) and cannot be "
                    "inlined; the tool is refused"
                )
            target = walk(_pointer(schema, ref, tool), (*chain, ref))
            siblings = keywords({k: v for k, v in node.items() if k != "$ref"}, chain)
            if not isinstance(target, dict):
                raise ConfigError(f"tool {tool!r}: $ref {ref!r} does not point to a schema")
            return {**target, **siblings}
        return keywords(node, chain)

    def keywords(node: dict[str, Any], chain: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DEFINITIONS:
                continue
            if key in _DATA:
                out[key] = value
            elif key in _NAMED and isinstance(value, dict):
                out[key] = {name: walk(item, chain) for name, item in value.items()}
            else:
                out[key] = walk(value, chain)
        return out

    inlined = walk(copy.deepcopy(schema), ())
    for key in _ROOT_ONLY:
        inlined.pop(key, None)
    return inlined
