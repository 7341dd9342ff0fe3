"""lokal.mcp without servers: the config file, tool names, inlined schemas, results."""

import json
import re
from types import SimpleNamespace

import pytest

from lokal.errors import ConfigError
from lokal.mcp.config import load_mcp_config, parse_mcp_config
from lokal.mcp.naming import NAME_PATTERN, assign_names, tool_name
from lokal.mcp.schemas import inline_refs
from lokal.tools.schema import ToolSpec

# --- config ---------------------------------------------------------------------------------


def test_the_common_config_shape_is_read_in_order():
    config = parse_mcp_config(
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "t"}},
                "remote": {"url": "http://127.0.0.1:8000/mcp", "headers": {"X-Key": "k"}},
                "off": {"command": "x", "disabled": True},
            }
        }
    )
    files, remote = config.servers
    assert (files.name, files.transport, files.args, files.env) == (
        "files",
        "stdio",
        ("-y", "server"),
        {"TOKEN": "t"},
    )
    assert (remote.transport, remote.url, remote.headers, remote.timeout) == (
        "http",
        "http://127.0.0.1:8000/mcp",
        {"X-Key": "k"},
        30.0,
    )


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"comand": "x"}, "unknown key 'comand'"),
        ({"args": ["a"]}, "give either 'command'"),
        ({"command": "x", "url": "http://h/mcp"}, "not both"),
        ({"command": "x", "args": "a b"}, "mcpServers.s.args must be a list of strings"),
        ({"command": "x", "env": {"A": 1}}, "mcpServers.s.env.A must be a string"),
        ({"command": "x", "env": {"A=B": "1"}}, "not an environment variable name"),
        ({"url": "ftp://h/mcp"}, "mcpServers.s.url must be an http"),
        ({"url": "http://h/mcp", "env": {}}, "mcpServers.s.env"),
        ({"command": "x", "timeout": 0}, "mcpServers.s.timeout"),
        ({"url": "http://h/mcp", "type": "sse"}, "SSE servers are not supported"),
        ({"command": "x", "type": "http"}, "mcpServers.s.type"),
    ],
)
def test_config_errors_name_the_field(body, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        parse_mcp_config({"mcpServers": {"s": body}})


def test_a_config_without_mcpservers_is_refused_and_an_mcp_section_is_read(tmp_path):
    with pytest.raises(ConfigError, match="mcpServers"):
        parse_mcp_config({"servers": {}})
    path = tmp_path / "lokal.yaml"
    path.write_text("mcp:\n  mcpServers:\n    calc: {command: calc-server}\n", encoding="utf-8")
    assert [s.name for s in load_mcp_config(path)] == ["calc"]
    bad = tmp_path / "servers.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_mcp_config(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_mcp_config(tmp_path / "missing.json")


# --- names ----------------------------------------------------------------------------------


def test_names_are_server_underscore_tool_sanitised():
    assert tool_name("files", "read_file") == "files_read_file"
    assert tool_name("my.server", "get-weather") == "my_server_get-weather"
    assert tool_name("a b", "x/y:z") == "a_b_x_y_z"
    assert tool_name("srv", "工具") == "srv___"


def test_long_names_are_cut_to_64_with_a_hash_that_keeps_them_apart():
    one = tool_name("server", "a" * 80)
    two = tool_name("server", "a" * 81)
    assert len(one) == len(two) == 64 and one != two
    assert NAME_PATTERN.match(one) and NAME_PATTERN.match(two)
    assert one == tool_name("server", "a" * 80)  # deterministic


def test_collisions_are_resolved_in_order_and_avoid_reserved_names():
    names = assign_names(
        [
            ("fx", "two_echo"),  # fx_two_echo
            ("fx.two", "echo"),  # fx_two_echo again: _2
            ("fx", "get-weather"),  # fx_get-weather
            ("fx", "get_weather"),  # same name to the parser ("-" = "_"): _2
            ("files", "calculator"),
            ("Files", "Calculator"),  # case is ignored too
        ],
        reserved=["files_calculator"],
    )
    assert list(names.values()) == [
        "fx_two_echo",
        "fx_two_echo_2",
        "fx_get-weather",
        "fx_get_weather_2",
        "files_calculator_2",
        "Files_Calculator_3",
    ]
    again = assign_names(list(names), reserved=["files_calculator"])
    assert again == names  # the same input gives the same names
    assert all(NAME_PATTERN.match(name) for name in names.values())


def test_a_cut_name_that_collides_still_fits():
    long_tool = "t" * 70
    names = assign_names([("s", long_tool), ("S", long_tool)])
    first, second = names.values()
    assert first != second and len(first) <= 64 and len(second) <= 64


# --- schemas --------------------------------------------------------------------------------

BOOKING = {
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "Booking": {
            "type": "object",
            "properties": {
                "address": {"$ref": "#/$defs/Address", "description": "where"},
                "nights": {"type": "integer", "default": {"$ref": "data, not a schema"}},
            },
        },
    },
    "properties": {
        "booking": {"$ref": "#/$defs/Booking"},
        "$defs": {"type": "string"},  # a parameter of that name is kept
    },
    "required": ["booking"],
}


def test_refs_are_inlined_and_definitions_dropped():
    inlined = inline_refs(BOOKING, tool="fx/book")
    assert "$ref" not in json.dumps(inlined).replace('"$ref": "data', "")
    assert "$defs" not in inlined
    address = inlined["properties"]["booking"]["properties"]["address"]
    assert address == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "description": "where",  # a keyword beside $ref is kept
    }
    assert inlined["properties"]["$defs"] == {"type": "string"}
    nights = inlined["properties"]["booking"]["properties"]["nights"]
    assert nights["default"] == {"$ref": "data, not a schema"}
    ToolSpec("fx_book", "", inlined)  # a valid tool schema
    assert BOOKING["properties"]["booking"] == {"$ref": "#/$defs/Booking"}  # not modified


def test_draft7_definitions_and_escaped_pointers_are_read():
    schema = {
        "definitions": {"a/b": {"type": "string"}},
        "properties": {"x": {"$ref": "#/definitions/a~1b"}},
    }
    assert inline_refs(schema)["properties"]["x"] == {"type": "string"}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {
                "$defs": {"Tree": {"properties": {"kids": {"items": {"$ref": "#/$defs/Tree"}}}}},
                "properties": {"tree": {"$ref": "#/$defs/Tree"}},
            },
            "tool 'fx/count_nodes': input schema is recursive (#/$defs/Tree -> #/$defs/Tree)",
        ),
        (
            {
                "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
                "properties": {"a": {"$ref": "#/$defs/A"}},
            },
            "recursive (#/$defs/A -> #/$defs/B -> #/$defs/A)",
        ),
        ({"properties": {"a": {"$ref": "#"}}}, "recursive (# -> #)"),
        (
            {"properties": {"a": {"$ref": "https://example.com/s.json"}}},
            "refers outside itself",
        ),
        ({"properties": {"a": {"$ref": "#/$defs/Missing"}}}, "points to nothing"),
    ],
)
def test_cycles_and_unresolvable_refs_are_refused_naming_the_tool(schema, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        inline_refs(schema, tool="fx/count_nodes")


# --- results --------------------------------------------------------------------------------


def _result(*texts, structured=None, is_error=False):
    blocks = [SimpleNamespace(type="text", text=text) for text in texts]
    return SimpleNamespace(content=blocks, structured_content=structured, is_error=is_error)


def test_structured_content_is_preferred_over_text():
    from lokal.mcp.client import result_output

    assert result_output(_result("3", structured={"result": 3})) == {"result": 3}
    assert result_output(_result("plain")) == "plain"
    assert result_output(_result('{"a": 1}')) == {"a": 1}  # JSON text read as JSON
    assert result_output(_result("one", "two")) == "one\n\ntwo"


def test_an_error_result_raises_with_the_tools_text():
    from lokal.mcp.client import McpToolError, result_output

    with pytest.raises(McpToolError, match="reported an error: no such city"):
        result_output(_result("no such city", is_error=True), "MCP tool 'w' of server 's'")
