"""ToolSpec: one tool type, made once at the boundary from every accepted form, its schema
checked before any model runs, one validator wording for argument errors."""

import json

import pytest

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.errors import ConfigError
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.decide import generate_ai_message
from lokal.tools import Tool, ToolRegistry, ToolSpec, openai_tools, tool, tool_specs

FLAT = {
    "name": "f",
    "description": "d",
    "parameters": {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    },
}


def test_openai_and_flat_forms_make_the_same_spec():
    wrapped = {"type": "function", "function": FLAT}
    (from_flat,) = tool_specs([FLAT])
    (from_openai,) = tool_specs([wrapped])
    assert from_flat.to_flat() == from_openai.to_flat() == FLAT
    assert openai_tools([from_flat]) == [wrapped]


def test_a_spec_passes_through_unchanged_and_a_tool_is_a_spec():
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    spec = ToolSpec("f", "d", FLAT["parameters"])
    made = tool_specs([spec, add])
    assert made[0] is spec
    assert made[1] is add and isinstance(add, ToolSpec) and isinstance(add, Tool)
    assert add.required == ["a", "b"]


def test_plain_functions_are_read_by_their_signature():
    def area(width: float, height: float = 1.0) -> float:
        """Area of a rectangle.

        Args:
            width: the width.
            height: the height.
        """
        return width * height

    (spec,) = tool_specs([area])
    assert spec.name == "area"
    assert spec.required == ["width"]
    assert spec.properties["width"]["type"] == "number"


def test_bfcl_types_map_to_json_schema():
    bfcl = {
        "name": "calc.area",
        "description": "",
        "parameters": {
            "type": "dict",
            "properties": {
                "base": {"type": "float"},
                "sides": {"type": "tuple", "items": {"type": "integer"}},
                "options": {"type": "dict", "properties": {"unit": {"type": "string"}}},
                "anything": {"type": "any"},
                "flag": {"type": "boolean"},
            },
            "required": ["base"],
        },
    }
    params = tool_specs([bfcl])[0].parameters
    assert params["type"] == "object"
    assert params["properties"]["base"]["type"] == "number"
    assert params["properties"]["sides"] == {"type": "array", "items": {"type": "integer"}}
    assert params["properties"]["options"]["type"] == "object"
    assert params["properties"]["options"]["properties"]["unit"]["type"] == "string"
    assert "type" not in params["properties"]["anything"]


def test_missing_parameters_become_an_empty_object_schema():
    (spec,) = tool_specs([{"name": "now"}])
    assert spec.parameters == {"type": "object", "properties": {}}


def test_a_spec_does_not_share_the_callers_schema():
    source = json.loads(json.dumps(FLAT))
    (spec,) = tool_specs([source])
    source["parameters"]["properties"]["x"]["type"] = "string"
    assert spec.properties["x"]["type"] == "integer"


@pytest.mark.parametrize(
    ("tools", "reason"),
    [
        ([{"description": "no name"}], "has no name"),
        ([{"name": "a"}, {"name": "a"}], "name a tool twice"),
        ([{"name": "a", "parameters": {"type": "weird"}}], "unknown parameter type"),
        ([{"name": "a", "parameters": {"type": "array"}}], "must be of type 'object'"),
        ([{"name": "a", "parameters": "x"}], "parameters must be an object"),
        (
            [{"name": "a", "parameters": {"properties": {"x": {"minimum": "ten"}}}}],
            "not a valid JSON Schema at properties/x/minimum",
        ),
        (
            [{"name": "a", "parameters": {"required": "x"}}],
            "required must be a list",
        ),
        ("not a list", "must be a list"),
        ([42], r"tools\[0\] must be an object or a function"),
    ],
)
def test_bad_tools_are_a_clear_config_error(tools, reason):
    with pytest.raises(ConfigError, match=reason):
        tool_specs(tools)


def test_a_bad_schema_is_refused_before_the_model_runs():
    backend = ScriptedBackend(['{"content": "never asked"}'])
    bad = [{"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": 3}}}}]
    with pytest.raises(ConfigError, match="tool 'a'"):
        generate_ai_message(
            load_profile(MODEL_CONFIG),
            [{"role": "user", "content": "hi"}],
            bad,
            backend=backend,
        )
    assert backend.requests == []  # the model was never asked


def test_the_decision_and_the_registry_word_an_argument_error_the_same_way():
    @tool
    def forecast(city: str, days: int) -> str:
        """Weather forecast."""
        return city

    registry = ToolRegistry([forecast])
    registry_error = registry.execute({"name": "forecast", "args": {"city": "Oslo"}})["content"]
    reply = json.dumps({"tool_calls": [{"name": "forecast", "args": {"city": "Oslo"}}]})
    profile = load_profile(MODEL_CONFIG).with_tool_calling(max_retries=0, mode="prompt_json")
    result = generate_ai_message(
        profile,
        [{"role": "user", "content": "weather in Oslo?"}],
        [forecast],
        backend=ScriptedBackend([reply]),
    )
    assert not result.ok and result.error.type == "invalid_arguments"
    wording = "invalid arguments for tool 'forecast': missing required argument 'days'"
    assert result.error.message == wording
    assert wording in json.loads(registry_error)["error"]
