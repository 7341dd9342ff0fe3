"""Schema references resolve only inside the schema: a ``$ref`` naming a URL or a file is a
ConfigError naming the tool, and no validator lokal makes ever fetches one (issue 19, item 1).

A real listening socket on 127.0.0.1 (``tripwire.Tripwire``) proves that no connection is
made: the ``$ref`` points at it."""

import json

import pytest

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.errors import ConfigError
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.decide import generate_ai_message
from lokal.tools import Tool, ToolRegistry, ToolSpec, tool_specs
from lokal.tools.schema import SCHEMA_REGISTRY, check_json_schema, schema_validator
from tripwire import Tripwire, tool_with_ref

OUTSIDE_REFS = [
    "{url}",
    "https://127.0.0.1:{port}/schema.json",
    "file:///etc/passwd",
    "other.json",
    "../schemas/path.json#/$defs/p",
    "//127.0.0.1:{port}/x",
]


@pytest.mark.parametrize("template", OUTSIDE_REFS)
def test_a_ref_outside_the_schema_is_a_config_error_naming_the_tool_and_nothing_is_fetched(
    template,
):
    with Tripwire() as wire:
        ref = template.format(url=wire.url(), port=wire.port)
        with pytest.raises(ConfigError, match=r"tool .read_doc..*refers outside the schema"):
            tool_specs([tool_with_ref(ref)])
        with pytest.raises(ConfigError, match="tool 'read_doc'"):
            ToolSpec.from_dict(tool_with_ref(ref))
    assert wire.connections == 0


def test_every_api_entry_refuses_it_without_a_connection():
    """ToolSpec, Tool / ToolRegistry and generate_ai_message (with tool_choice required)."""
    with Tripwire() as wire:
        schema = tool_with_ref(wire.url())
        parameters = schema["function"]["parameters"]
        with pytest.raises(ConfigError, match="tool 'read_doc'"):
            ToolSpec("read_doc", "Read a document.", parameters)
        with pytest.raises(ConfigError, match="tool 'read_doc'"):
            ToolRegistry().register(
                Tool(name="read_doc", description="", parameters=parameters, func=lambda path: path)
            )
        backend = ScriptedBackend(
            [json.dumps({"tool_calls": [{"name": "read_doc", "args": {"path": "a.txt"}}]})]
        )
        with pytest.raises(ConfigError, match="tool 'read_doc'"):
            generate_ai_message(
                load_profile(MODEL_CONFIG),
                [{"role": "user", "content": "read a.txt"}],
                [schema],
                backend=backend,
                tool_choice="required",
            )
        assert backend.requests == []  # refused before the model runs
    assert wire.connections == 0 and wire.requests == []


def test_a_nested_id_and_a_dynamic_ref_are_refused_too():
    with Tripwire() as wire:
        nested_id = {
            "type": "object",
            "properties": {"p": {"$id": wire.url("/base/"), "$ref": "#/$defs/x"}},
        }
        with pytest.raises(ConfigError, match=r"tool 't'.*declares its own \$id"):
            ToolSpec("t", "", nested_id)
        dynamic = {"type": "object", "properties": {"p": {"$dynamicRef": wire.url()}}}
        with pytest.raises(ConfigError, match=r"tool 't'.*\$dynamicRef.*refers outside"):
            ToolSpec("t", "", dynamic)
    assert wire.connections == 0


def test_local_refs_still_work():
    parameters = {
        "type": "object",
        "properties": {
            "address": {"$ref": "#/$defs/Address"},
            "nights": {"$ref": "#/definitions/Nights"},
        },
        "required": ["address", "nights"],
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            }
        },
        "definitions": {"Nights": {"type": "integer", "minimum": 1}},
    }
    spec = ToolSpec("book", "Book a room.", parameters)
    assert spec.validate({"address": {"city": "Oslo"}, "nights": 2}) is None
    problem = spec.validate({"address": {}, "nights": 0})
    assert "missing required argument 'city'" in problem
    assert "nights" in problem
    # a root $id does not make the local references go anywhere
    with Tripwire() as wire:
        rooted = ToolSpec("book", "", {**parameters, "$id": wire.url("/root.json")})
        assert rooted.validate({"address": {"city": "Oslo"}, "nights": 1}) is None
        assert rooted.validate({"address": {"city": 3}, "nights": 1}) is not None
    assert wire.connections == 0


def test_a_local_ref_to_nothing_is_refused_when_the_spec_is_made():
    parameters = {"type": "object", "properties": {"p": {"$ref": "#/$defs/Missing"}}}
    with pytest.raises(ConfigError, match=r"tool 't'.*points to nothing"):
        ToolSpec("t", "", parameters)


def test_the_shared_registry_never_fetches_even_an_unchecked_ref():
    """Defence in depth: a validator made with schema_validator refuses to retrieve."""
    with Tripwire() as wire:
        validator = schema_validator({"$ref": wire.url()})
        with pytest.raises(Exception, match=r"Unresolvable|retrieve|NoSuchResource|127\.0\.0\.1"):
            validator.is_valid("x")
        check_json_schema({"type": "object", "properties": {"p": {"$ref": wire.url()}}})
    assert wire.connections == 0
    assert SCHEMA_REGISTRY.get_or_retrieve  # the registry exists and is lokal's only one


def test_a_response_format_with_a_remote_ref_is_refused_without_a_connection():
    with Tripwire() as wire:
        backend = ScriptedBackend(['{"content": {"a": "x"}}'])
        response_format = {
            "type": "json_schema",
            "json_schema": {
                "name": "answer",
                "schema": {"type": "object", "properties": {"a": {"$ref": wire.url()}}},
            },
        }
        with pytest.raises(ConfigError, match=r"response_format.*refers outside the schema"):
            generate_ai_message(
                load_profile(MODEL_CONFIG),
                [{"role": "user", "content": "hi"}],
                backend=backend,
                response_format=response_format,
            )
    assert wire.connections == 0


def test_a_valid_schema_is_checked_once_an_invalid_one_every_time(monkeypatch):
    from jsonschema.exceptions import SchemaError

    import lokal.tools.schema as schema_module

    checked = []
    real = schema_module._check_json_schema
    monkeypatch.setattr(schema_module, "_check_json_schema", lambda s: checked.append(s) or real(s))
    valid = {"type": "object", "properties": {"q": {"type": "string"}}, "x-issue": 19}
    check_json_schema(valid)
    check_json_schema(json.loads(json.dumps(valid)))  # the same schema, a new object
    assert len(checked) == 1
    for _ in range(2):
        with pytest.raises(SchemaError, match="is not of type 'object'"):
            check_json_schema({"type": "object", "x-issue": 19, "properties": 5})
    assert len(checked) == 3
