import pytest

from lokal.errors import ConfigError
from lokal.schema import normalize_tools_schema, to_openai_tools


def test_openai_and_flat_forms_normalize_to_the_same_tool():
    flat = {
        "name": "f",
        "description": "d",
        "parameters": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
        },
    }
    wrapped = {"type": "function", "function": flat}
    assert normalize_tools_schema([flat]) == normalize_tools_schema([wrapped])
    assert to_openai_tools([flat])[0] == {"type": "function", "function": flat}


def test_bfcl_types_map_to_json_schema():
    tool = {
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
    params = normalize_tools_schema([tool])[0]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["base"]["type"] == "number"
    assert params["properties"]["sides"] == {"type": "array", "items": {"type": "integer"}}
    assert params["properties"]["options"]["type"] == "object"
    assert params["properties"]["options"]["properties"]["unit"]["type"] == "string"
    assert "type" not in params["properties"]["anything"]


def test_missing_parameters_become_an_empty_object_schema():
    tool = normalize_tools_schema([{"name": "now"}])[0]
    assert tool["parameters"] == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("tools", "reason"),
    [
        ([{"description": "no name"}], "has no name"),
        ([{"name": "a"}, {"name": "a"}], "names a tool twice"),
        ([{"name": "a", "parameters": {"type": "weird"}}], "unknown parameter type"),
        ("not a list", "must be a list"),
    ],
)
def test_bad_tools_schema_is_a_clear_config_error(tools, reason):
    with pytest.raises(ConfigError, match=reason):
        normalize_tools_schema(tools)
