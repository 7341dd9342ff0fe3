"""A tool of an MCP server whose input schema refers to a URL is refused, naming the tool,
and nothing is fetched (issue 19, item 1): ``ref_server.py`` lists such a tool as raw JSON,
its ``$ref`` pointing at a listening socket on 127.0.0.1 that must see no connection."""

import json
import sys
from pathlib import Path

import pytest

from lokal.mcp.client import McpSession
from lokal.tools.registry import ToolRegistry
from tripwire import Tripwire

# starts MCP servers: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

pytest.importorskip("mcp")

REF_SERVER = Path(__file__).resolve().parent / "ref_server.py"


def test_a_tool_with_a_remote_ref_is_refused_and_nothing_is_fetched():
    with Tripwire() as wire:
        config = {
            "mcpServers": {
                "refs": {
                    "command": sys.executable,
                    "args": [str(REF_SERVER), wire.url("/internal-admin?secret=1")],
                }
            }
        }
        with McpSession(config) as session:
            refused = [i for i in session.infos if i.problem]
            assert [i.remote_name for i in refused] == ["fetch_me"]
            assert "tool 'refs/fetch_me'" in refused[0].problem
            assert "refers outside itself" in refused[0].problem
            assert any("fetch_me" in p for p in session.problems)
            names = {t.name for t in session.tools}
            assert "refs_fetch_me" not in names
            assert {"refs_local_ref", "refs_plain"} <= names
            # the other tools work, the local reference inlined
            registry = ToolRegistry()
            session.register(registry)
            local = next(t for t in session.tools if t.name == "refs_local_ref")
            assert local.parameters["properties"]["city"] == {"type": "string"}
            message = registry.execute({"name": "refs_local_ref", "args": {"city": "Oslo"}})
            assert message["status"] == "success"
            assert json.loads(message["content"])["output"] == "Oslo"
    assert wire.connections == 0 and wire.requests == []
