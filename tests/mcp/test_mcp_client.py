"""MCP servers' tools as lokal tools, against the fixture server as a real subprocess."""

import json
import threading
import time

import pytest
from mcp_fixtures import gone, stdio_server

from lokal.errors import ConfigError
from lokal.mcp.client import McpError, McpSession, open_mcp_tools
from lokal.tools.registry import ToolRegistry, tool

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

pytest.importorskip("mcp")

SECRET = "LOKAL_TEST_MCP_SECRET"


@pytest.fixture(scope="module")
def session():
    """Two servers: ``fx`` (with an extra tool ``two_echo``) and ``fx.two``, whose ``echo``
    is also named ``fx_two_echo``; the parent holds a secret that must not reach them."""
    config = {
        "mcpServers": {
            "fx": stdio_server("--collide", "two_echo", env={"FIXTURE_TOKEN": "t0k"}, timeout=3),
            "fx.two": stdio_server("--name", "two", "--recursive"),
        }
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET, "do-not-leak")
        with McpSession(config, reserved=["calculator"]) as opened:
            yield opened


@pytest.fixture(scope="module")
def registry(session):
    reg = ToolRegistry()

    @tool
    def calculator(expression: str) -> str:
        """Calculate."""
        return expression

    reg.register(calculator)
    session.register(reg)
    return reg


def run(registry, name, **args):
    message = registry.execute({"name": name, "args": args})
    return message["status"], json.loads(message["content"])


def test_every_tool_is_named_server_tool_and_keeps_its_description(session):
    names = {(i.server, i.remote_name): i.name for i in session.infos}
    assert names[("fx", "echo")] == "fx_echo"
    assert names[("fx", "get-weather")] == "fx_get-weather"  # a hyphen is allowed
    assert names[("fx", "text.shout")] == "fx_text_shout"  # a dot is not
    by_name = {t.name: t for t in session.tools}
    assert by_name["fx_echo"].description == "Echo the text back, unchanged."
    assert by_name["fx_echo"].parameters["required"] == ["text"]


def test_a_name_two_servers_share_is_made_unique_in_config_order(session, registry):
    names = {(i.server, i.remote_name): i.name for i in session.infos}
    assert names[("fx", "two_echo")] == "fx_two_echo"
    assert names[("fx.two", "echo")] == "fx_two_echo_2"
    assert run(registry, "fx_two_echo") == (
        "success",
        {"status": "success", "output": {"result": "two_echo from fixture"}, "error": None},
    )
    status, content = run(registry, "fx_two_echo_2", text="hi")
    assert status == "success" and content["output"] == {"result": "echo: hi"}


def test_the_input_schema_is_inlined(session, registry):
    book = next(t for t in session.tools if t.name == "fx_book")
    text = json.dumps(book.parameters)
    assert "$ref" not in text and "$defs" not in text
    address = book.parameters["properties"]["booking"]["properties"]["address"]
    assert address["properties"]["city"]["type"] == "string"
    booking = {"guest": "Ada", "address": {"city": "Oslo"}, "nights": 2}
    status, content = run(registry, "fx_book", booking=booking)
    assert status == "success"
    assert content["output"] == {"result": "booked 2 night(s) for Ada in Oslo"}
    # the inlined schema is what lokal validates against, before the server is asked
    status, content = run(registry, "fx_book", booking={"guest": "Ada", "nights": 2})
    assert status == "error" and "missing required argument 'address'" in content["error"]


def test_a_recursive_schema_is_refused_naming_the_tool_and_the_rest_still_work(session):
    refused = [i for i in session.infos if i.problem]
    assert [(i.server, i.remote_name) for i in refused] == [("fx.two", "count_nodes")]
    assert "tool 'fx.two/count_nodes': input schema is recursive" in refused[0].problem
    assert any("count_nodes" in p for p in session.problems)
    assert "fx_two_count_nodes" not in {t.name for t in session.tools}
    assert "fx_two_add" in {t.name for t in session.tools}


def test_calls_with_structured_output_and_hyphenated_names(registry):
    assert run(registry, "fx_add", a=2, b=3)[1]["output"] == {"result": 5}
    assert run(registry, "fx_get-weather", city="Oslo")[1]["output"] == {"result": "sunny in Oslo"}
    assert run(registry, "fx_text_shout", text="hey")[1]["output"] == {"result": "HEY"}


def test_a_tool_error_and_a_hanging_tool_become_error_tool_messages(registry):
    started = time.monotonic()
    messages = registry.execute_many(
        [
            {"name": "fx_explode", "args": {"message": "the disk is on fire"}},
            {"name": "fx_hang", "args": {}},
            {"name": "fx_echo", "args": {"text": "still here"}},
        ]
    )
    elapsed = time.monotonic() - started
    explode, hang, echo = (json.loads(m["content"]) for m in messages)
    assert explode["status"] == "error"
    assert "MCP tool 'explode' of server 'fx' reported an error: " in explode["error"]
    assert explode["error"].endswith("the disk is on fire")
    assert hang["status"] == "error" and "timed out after 3s" in hang["error"]
    assert echo == {"status": "success", "output": {"result": "echo: still here"}, "error": None}
    assert elapsed < 3 + 5  # the server's timeout, not the registry's 30 s default
    # the run goes on: the server answers the next call
    assert run(registry, "fx_echo", text="after")[0] == "success"


def test_the_child_gets_only_its_env_and_path(registry):
    env = run(registry, "fx_whoami")[1]["output"]["env"]
    assert set(env) == {"FIXTURE_TOKEN", "PATH"}
    assert env["FIXTURE_TOKEN"] == "t0k"
    assert SECRET not in env


def test_a_reserved_name_is_not_taken(session, registry):
    assert "calculator" in registry.names()
    assert all(t.name != "calculator" for t in session.tools)


def test_a_server_that_dies_is_reported_once_and_its_tools_withdrawn():
    reports = []
    config = {"mcpServers": {"doomed": stdio_server(), "other": stdio_server("--name", "other")}}
    with McpSession(config, on_report=reports.append) as session:
        registry = ToolRegistry()
        session.register(registry)
        pid = run(registry, "doomed_whoami")[1]["output"]["pid"]
        messages = registry.execute_many(
            [{"name": "doomed_die", "args": {}}, {"name": "doomed_hang", "args": {"seconds": 30}}]
        )
        errors = [json.loads(m["content"])["error"] for m in messages]
        assert all("MCP server 'doomed' stopped" in e for e in errors)
        assert "withdrawn for the rest of the run" in errors[0]
        assert len(reports) == len(session.reports) == 1  # reported once
        assert not session.alive("doomed") and session.alive("other")
        assert not any(name.startswith("doomed_") for name in registry.names())
        status, content = run(registry, "doomed_echo", text="x")
        assert status == "error" and "unknown tool 'doomed_echo'" in content["error"]
        with pytest.raises(McpError, match="has stopped"):
            session.call("doomed", "echo", {"text": "x"})
        assert run(registry, "other_echo", text="ok")[0] == "success"  # the run goes on
        assert gone(pid)
        assert len(reports) == 1


def test_closing_stops_every_server_even_with_a_call_in_flight():
    config = {"mcpServers": {"a": stdio_server(), "b": stdio_server("--name", "b")}}
    session = McpSession(config).open()
    pids = [session.call(name, "whoami")["pid"] for name in ("a", "b")]
    outcome = {}

    def hang():
        try:
            session.call("a", "hang", {"seconds": 600})
        except McpError as exc:
            outcome["error"] = str(exc)

    worker = threading.Thread(target=hang)
    worker.start()
    time.sleep(0.5)
    started = time.monotonic()
    session.close()
    worker.join(timeout=30)
    assert time.monotonic() - started < 20
    assert not worker.is_alive() and "error" in outcome
    assert all(gone(pid) for pid in pids), "a server process outlived the session"
    with pytest.raises(McpError, match="closed"):
        session.call("b", "echo", {"text": "x"})


def test_open_mcp_tools_yields_tools_and_registers_them_for_the_block(tmp_path):
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"fx": stdio_server()}}), encoding="utf-8")
    registry = ToolRegistry()
    with open_mcp_tools(path, registry=registry) as tools:
        assert "fx_echo" in {t.name for t in tools} and "fx_echo" in registry
        assert tools[0].run({"text": "x"}) == {"result": "echo: x"}
        pid = next(t for t in tools if t.name == "fx_whoami").run({})["pid"]
    assert "fx_echo" not in registry
    assert gone(pid)


def test_a_server_that_does_not_start_is_reported_and_left_out(tmp_path):
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nsys.stderr.write('no config found\\n')\nsys.exit(4)\n")
    import sys

    config = {
        "mcpServers": {
            "broken": {"command": sys.executable, "args": [str(crash)]},
            "fx": stdio_server(),
        }
    }
    with McpSession(config) as session:
        assert not session.alive("broken") and session.alive("fx")
        assert len(session.problems) == 1
        assert "MCP server 'broken'" in session.problems[0]
        assert "no config found" in session.problems[0]  # the server's stderr is quoted
        assert {i.server for i in session.infos} == {"fx"}


def test_a_command_that_does_not_exist_is_a_config_error_before_anything_starts():
    config = {"mcpServers": {"nope": {"command": "lokal-no-such-mcp-server"}}}
    with pytest.raises(ConfigError, match="'nope': command 'lokal-no-such-mcp-server' not found"):
        McpSession(config).open()
