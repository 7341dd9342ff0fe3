"""Tool schemas: the one ``ToolSpec`` type, made once from any accepted form, and the one
validator that words argument errors.

Accepted forms, all turned into ``ToolSpec`` by ``tool_specs``:

- OpenAI: ``{"type": "function", "function": {"name", "description", "parameters"}}``;
- flat: ``{"name", "description", "parameters"}``;
- BFCL's Python-ish type names (``dict``, ``float``, ``tuple``, ``any``), mapped to JSON Schema;
- ``@tool`` functions (``lokal.tools.Tool`` is a ``ToolSpec``) and plain functions, read by
  ``lokal.tools.signature.function_to_schema``.

The parameters schema is checked against JSON Schema 2020-12 when the spec is made, so a bad
schema is a ``ConfigError`` before any model runs. Grammars, prompts, the parser, the planner and
the registry all take ``ToolSpec``s and never convert a tool again.

**References stay inside the schema.** A schema comes from a client, a model or an MCP server,
so nothing in it may make lokal open a URL or a file: a ``$ref`` (or ``$dynamicRef``) must be a
fragment of the schema itself (``#/$defs/...``, ``#/definitions/...``, ``#anchor``) that points
to something, and a nested ``$id`` (which would change what a reference means) is refused; any
other reference (``http:``, ``https:``, ``file:``, a relative URI) is a ``ConfigError`` naming
the tool (``check_local_refs``). Every validator lokal makes (``schema_validator``,
``check_json_schema``) uses ``SCHEMA_REGISTRY``: empty, with a retrieve function that refuses,
so even a reference that slipped past the check is never fetched.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Iterable
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

from lokal.errors import ConfigError

__all__ = [
    "SCHEMA_REGISTRY",
    "ToolSpec",
    "check_json_schema",
    "check_local_refs",
    "describe_validation_error",
    "json_schema_type",
    "openai_tools",
    "schema_validator",
    "tool_spec",
    "tool_specs",
]

# --- references: never fetched ---------------------------------------------------------------


def _refuse_retrieval(uri: str) -> Any:
    """The retrieve function of SCHEMA_REGISTRY: lokal never fetches a schema."""
    raise NoSuchResource(ref=uri)


# The one registry of every validator lokal makes: no resources (jsonschema adds the bundled
# meta-schemas itself), and a retrieve function that refuses any URI.
SCHEMA_REGISTRY: Registry = Registry(retrieve=_refuse_retrieval)

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
_VALUE_KEYWORDS = ("enum", "const", "default", "examples")  # values, never schemas
_NAMED_SCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def schema_validator(schema: Any) -> Draft202012Validator:
    """A 2020-12 validator for ``schema`` that resolves references only inside it."""
    return Draft202012Validator(schema, registry=SCHEMA_REGISTRY)


_CHECKED: dict[str, None] = {}  # schemas found valid, as canonical JSON
_CHECKED_MAX = 1024


def check_json_schema(schema: Any) -> None:
    """``Draft202012Validator.check_schema``, with lokal's registry; raise SchemaError. A
    schema found valid is not checked again (a served client sends the same tools with every
    request, and each request's decision reads them again: 0.6 ms of CPU a schema)."""
    try:
        key: str | None = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        key = None
    if key is not None and key in _CHECKED:
        return
    _check_json_schema(schema)
    if key is not None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[key] = None


def _check_json_schema(schema: Any) -> None:
    meta = Draft202012Validator(
        Draft202012Validator.META_SCHEMA,
        registry=SCHEMA_REGISTRY,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    error = best_match(meta.iter_errors(schema))
    if error is not None:
        raise SchemaError.create_from(error)


def check_local_refs(schema: Any, where: str) -> None:
    """Raise ConfigError (starting with ``where``) unless every reference in ``schema`` is a
    fragment of ``schema`` that resolves in it, and no subschema declares its own ``$id``."""
    found: list[tuple[str, str]] = []

    def walk(node: Any, path: str, root: bool) -> None:
        if isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{path}/{index}", False)
            return
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key in _VALUE_KEYWORDS:
                continue
            if key in _REF_KEYWORDS and isinstance(value, str):
                if not value.startswith("#"):
                    raise ConfigError(
                        f"{where}: {key} {value!r} at {path or '(root)'} refers outside the "
                        "schema; only references inside it (#/$defs/...) are allowed, and "
                        "lokal never fetches a schema"
                    )
                found.append((key, value))
            elif key == "$id" and not root:
                raise ConfigError(
                    f"{where}: a subschema at {path} declares its own $id {value!r}; "
                    "only references inside the schema (#/$defs/...) are allowed"
                )
            elif key in _NAMED_SCHEMAS and isinstance(value, dict):
                for name, item in value.items():
                    walk(item, f"{path}/{key}/{name}", False)
            else:
                walk(value, f"{path}/{key}", False)

    walk(schema, "", True)
    if not found or not isinstance(schema, dict):
        return
    resolver = SCHEMA_REGISTRY.resolver_with_root(DRAFT202012.create_resource(schema))
    for key, ref in found:
        if key == "$ref":
            try:
                resolver.lookup(ref)
            except Unresolvable:
                raise ConfigError(
                    f"{where}: $ref {ref!r} points to nothing in the schema"
                ) from None


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


# --- the validator's wording ----------------------------------------------------------------


def _show(value: Any) -> str:
    """A short rendering of an argument value for an error message."""
    text = f"'{value}'" if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_validation_error(error: Any) -> str:
    """One jsonschema ValidationError as a sentence a model can act on."""
    parts = [str(p) for p in error.absolute_path]
    where = ".".join(parts)
    subject = f"argument '{where}'" if where else "the arguments"
    validator = error.validator
    if validator == "type":
        expected = error.validator_value
        if isinstance(expected, list):
            expected = " or ".join(expected)
        return f"{subject} must be {expected}, got {_show(error.instance)}"
    if validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        names = ", ".join(f"'{name}'" for name in missing)
        prefix = f"{subject} " if where else ""
        return f"{prefix}missing required argument{'s' if len(missing) > 1 else ''} {names}"
    if validator == "additionalProperties":
        allowed = sorted((error.schema.get("properties") or {}).keys())
        extra = sorted(k for k in error.instance if k not in allowed)
        names = ", ".join(f"'{name}'" for name in extra)
        hint = f" (allowed: {', '.join(allowed)})" if allowed else " (this tool takes none)"
        return f"unexpected argument{'s' if len(extra) > 1 else ''} {names}{hint}"
    if validator == "enum":
        options = ", ".join(_show(v) for v in error.validator_value)
        return f"{subject} must be one of {options}, got {_show(error.instance)}"
    return f"{subject}: {error.message}"


# --- ToolSpec -------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON Schema for its arguments.

    Making one normalises the parameters (BFCL type names → JSON Schema, ``type: object`` and
    ``properties`` filled in) and checks them; a schema that is not JSON Schema raises
    ``ConfigError`` naming the tool.
    """

    name: str
    description: str
    parameters: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"a tool needs a non-empty name, got {self.name!r}")
        self.description = str(self.description or "")
        parameters = {} if self.parameters is None else self.parameters
        if not isinstance(parameters, dict):
            raise ConfigError(f"tool {self.name!r}: parameters must be a JSON Schema object")
        parameters = _normalize_node(copy.deepcopy(parameters), self.name)
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        if parameters["type"] != "object":
            raise ConfigError(
                f"tool {self.name!r}: parameters must be of type 'object', "
                f"got {parameters['type']!r}"
            )
        try:
            check_json_schema(parameters)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            raise ConfigError(
                f"tool {self.name!r}: parameters is not a valid JSON Schema at {where}: "
                f"{exc.message}"
            ) from None
        check_local_refs(parameters, f"tool {self.name!r}")
        self.parameters = parameters

    @functools.cached_property
    def _validator(self) -> Draft202012Validator:
        return schema_validator(self.parameters)

    @property
    def properties(self) -> dict[str, Any]:
        """The schema of each named parameter."""
        return self.parameters.get("properties") or {}

    @property
    def required(self) -> list[str]:
        """The names of the parameters a call must give."""
        return list(self.parameters.get("required") or [])

    def validate(self, args: Any) -> str | None:
        """None when ``args`` fit the parameters, else every problem in one readable line."""
        if not isinstance(args, dict):
            return f"arguments must be a JSON object, got {_show(args)}"
        errors = sorted(self._validator.iter_errors(args), key=lambda e: [str(p) for p in e.path])
        if not errors:
            return None
        return "; ".join(dict.fromkeys(describe_validation_error(e) for e in errors))

    def to_flat(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` (a copy)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": copy.deepcopy(self.parameters),
        }

    def to_openai(self) -> dict[str, Any]:
        """``{"type": "function", "function": {...}}``, as chat templates and servers expect."""
        return {"type": "function", "function": self.to_flat()}

    def schema(self, form: Literal["openai", "flat"] = "flat") -> dict[str, Any]:
        """This tool's schema in ``flat`` or ``openai`` form."""
        if form == "flat":
            return self.to_flat()
        if form == "openai":
            return self.to_openai()
        raise ValueError(f"unknown schema form {form!r}; use 'openai' or 'flat'")

    @classmethod
    def from_dict(cls, data: Any, where: str = "tool") -> ToolSpec:
        """A spec from the OpenAI or the flat form."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be an object, got {type(data).__name__}")
        body = data.get("function") if isinstance(data.get("function"), dict) else data
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where} has no name")
        parameters = body.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise ConfigError(f"{where} ({name}): parameters must be an object")
        return cls(name, str(body.get("description") or ""), parameters or {})


def tool_spec(item: Any, where: str = "tool") -> ToolSpec:
    """One tool in any accepted form as a ``ToolSpec`` (a ``ToolSpec`` is returned as is)."""
    if isinstance(item, ToolSpec):
        return item
    if isinstance(item, dict):
        return ToolSpec.from_dict(item, where)
    if callable(item):
        from lokal.tools.signature import function_to_schema

        made = function_to_schema(item)
        return ToolSpec(made["name"], made["description"], made["parameters"])
    raise ConfigError(f"{where} must be an object or a function, got {type(item).__name__}")


def tool_specs(tools: Any) -> list[ToolSpec]:
    """``tools`` (None, one tool, or a list in any accepted form) as ``ToolSpec``s.

    This is the boundary: every schema is checked here, and two tools of one name are refused.
    """
    if tools is None:
        return []
    if isinstance(tools, dict | ToolSpec) or (callable(tools) and not isinstance(tools, type)):
        tools = [tools]
    if not isinstance(tools, Iterable) or isinstance(tools, str | bytes):
        raise ConfigError(f"tools must be a list of tools, got {type(tools).__name__}")
    specs = [tool_spec(item, f"tools[{index}]") for index, item in enumerate(tools)]
    names = [spec.name for spec in specs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"tools name a tool twice: {', '.join(duplicates)}")
    return specs


def openai_tools(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """The specs in OpenAI form."""
    return [spec.to_openai() for spec in specs]
