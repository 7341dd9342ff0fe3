"""``lokal mcp serve`` refuses a hard link in its workspace to a file outside it (issue 19,
item 2), read by the SDK's client over stdio."""

import asyncio
import json
import os
import sys
import uuid

import pytest

from lokal.cli import main

# starts an MCP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

mcp = pytest.importorskip("mcp")


def _calls(workspace, calls):
    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "lokal.cli", "mcp", "serve", "--workspace", str(workspace)],
    )

    async def session():
        async with mcp.Client(params) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(session())


def test_lokal_mcp_serve_refuses_a_hard_link_to_a_file_outside(tmp_path):
    secret = f"TOP-SECRET-{uuid.uuid4().hex}"
    outside = tmp_path / "secret.txt"
    outside.write_text(secret + " needle", encoding="utf-8")
    outside.chmod(0o600)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("needle in the notes", encoding="utf-8")
    os.link(outside, ws / "link.txt")
    read, search, code = _calls(
        ws,
        [
            ("file_reader", {"path": "link.txt"}),
            ("local_file_search", {"query": "needle"}),
            ("code_execution", {"code": "import os; print(sorted(os.listdir('workspace')))"}),
        ],
    )
    assert read.is_error
    assert "hard links" in read.content[0].text
    assert not search.is_error
    assert [r["path"] for r in search.structured_content["results"]] == ["notes.txt"]
    assert search.structured_content["hard_links_skipped"] == 1
    assert not code.is_error
    assert "['notes.txt']" in code.structured_content["stdout"]
    for result in (read, search, code):
        assert secret not in json.dumps(result.model_dump(mode="json"))


def test_lokal_mcp_serve_refuses_the_root_as_workspace(capsys):
    assert main(["mcp", "serve", "--workspace", "/"]) == 2
    assert "root of the file system" in capsys.readouterr().err
