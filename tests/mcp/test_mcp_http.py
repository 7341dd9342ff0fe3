"""An MCP server over streamable HTTP on loopback (uvicorn, in a subprocess)."""

import socket
import subprocess
import sys
import time

import pytest
from mcp_fixtures import FIXTURE_SERVER

from lokal.mcp.client import McpSession
from lokal.tools.registry import ToolRegistry

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

pytest.importorskip("mcp")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def http_server():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(FIXTURE_SERVER), "--name", "web", "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(process.stderr.read().decode()[-2000:]) from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_tools_of_a_streamable_http_server(http_server):
    config = {
        "mcpServers": {"web": {"url": http_server, "headers": {"X-Lokal": "1"}, "timeout": 3}}
    }
    with McpSession(config) as session:
        registry = ToolRegistry()
        session.register(registry)
        assert {"web_echo", "web_get-weather", "web_book"} <= set(registry.names())
        message = registry.execute({"name": "web_add", "args": {"a": 20, "b": 22}})
        assert message["status"] == "success" and '"output": {"result": 42}' in message["content"]
        failed = registry.execute({"name": "web_explode", "args": {"message": "nope"}})
        assert failed["status"] == "error" and "nope" in failed["content"]
        hung = registry.execute({"name": "web_hang", "args": {}})
        assert hung["status"] == "error" and "timed out after 3s" in hung["content"]
