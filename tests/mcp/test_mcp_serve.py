"""``lokal mcp serve`` exercised by the SDK's client, and ``lokal mcp list``."""

import asyncio
import json
import sys

import pytest
from mcp_fixtures import stdio_server

from helpers import DATA
from lokal.cli import main

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

mcp = pytest.importorskip("mcp")

WORKSPACE = DATA / "workspace"


def _serve(*options: str):
    return mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "lokal.cli", "mcp", "serve", "--workspace", str(WORKSPACE), *options],
    )


async def _session(calls):
    async with mcp.Client(_serve()) as client:
        listed = await client.list_tools()
        results = [await client.call_tool(name, args) for name, args in calls]
        return listed.tools, results


def test_lokal_mcp_serve_lists_and_runs_its_tools_confined_to_the_workspace(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not for you", encoding="utf-8")
    tools, (read, escape, dotdot, calc) = asyncio.run(
        _session(
            [
                ("file_reader", {"path": "docs/agent_intro.txt", "max_chars": 100}),
                ("file_reader", {"path": str(outside)}),
                ("file_reader", {"path": "../../etc/passwd"}),
                ("calculator", {"expression": "6 * 7"}),
            ]
        )
    )
    names = {t.name for t in tools}
    assert {"file_reader", "local_file_search", "calculator", "code_execution"} <= names
    reader = next(t for t in tools if t.name == "file_reader")
    assert reader.input_schema["required"] == ["path"]
    assert not read.is_error
    assert read.structured_content["path"] == "docs/agent_intro.txt"
    assert read.structured_content["content"]
    for refused in (escape, dotdot):
        assert refused.is_error
        assert "outside the workspace" in refused.content[0].text
    assert "not for you" not in json.dumps(escape.model_dump(mode="json"))
    assert calc.structured_content["result"] == 42


def test_bad_arguments_are_an_error_result_worded_by_lokal():
    _, (bad,) = asyncio.run(_session([("calculator", {})]))
    assert bad.is_error
    assert bad.content[0].text == (
        "invalid arguments for tool 'calculator': missing required argument 'expression'"
    )


def test_code_execution_runs_in_the_sandbox():
    _, (ran,) = asyncio.run(_session([("code_execution", {"code": "print(6 * 7)"})]))
    assert not ran.is_error, ran.content
    assert ran.structured_content["stdout"].strip() == "42"


def test_serve_refuses_a_workspace_that_is_not_a_folder(tmp_path, capsys):
    assert main(["mcp", "serve", "--workspace", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lokal mcp: error: --workspace") and len(err.splitlines()) == 1


def test_lokal_mcp_list_shows_the_names_lokal_gives(tmp_path, capsys):
    path = tmp_path / "servers.json"
    config = {"mcpServers": {"fx": stdio_server("--recursive")}}
    path.write_text(json.dumps(config), encoding="utf-8")
    assert main(["mcp", "list", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fx: 10 tool(s)")
    assert "  fx_get-weather  " in out and "(get-weather)" in out
    assert "fx_text_shout" in out and "refused: tool 'fx/count_nodes'" in out
    assert main(["mcp", "list", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    tools = record["servers"]["fx"]["tools"]
    assert record["servers"]["fx"]["started"] and len(tools) == 10
    assert {t["name"] for t in tools} >= {"fx_echo", "fx_book", "fx_text_shout"}


def test_lokal_mcp_list_refuses_a_bad_config_in_one_line(tmp_path, capsys):
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"fx": {"comand": "x"}}}), encoding="utf-8")
    assert main(["mcp", "list", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mcpServers.fx: unknown key 'comand'" in err
