"""MCP (Model Context Protocol): tools of MCP servers as lokal tools, and lokal's tools served
over MCP.

- ``config``: the ``{"mcpServers": {...}}`` file (``load_mcp_config``);
- ``naming``: ``{server}_{tool}`` names within ``^[a-zA-Z0-9_-]{1,64}$``, without collisions;
- ``schemas``: input schemas with ``$ref``/``$defs`` inlined, cycles refused;
- ``client``: ``McpSession`` / ``open_mcp_tools`` (needs the ``mcp`` package: ``lokal[mcp]``);
- ``server``: ``lokal mcp serve``, lokal's built-in tools and sandbox over stdio.

The SDK is imported only when a session opens or a server starts.
"""

from __future__ import annotations

from typing import Any

from lokal.mcp.config import McpConfig, McpServerConfig, load_mcp_config, parse_mcp_config
from lokal.mcp.naming import assign_names, tool_name
from lokal.mcp.schemas import inline_refs

__all__ = [
    "McpConfig",
    "McpError",
    "McpServerConfig",
    "McpSession",
    "McpTools",
    "assign_names",
    "inline_refs",
    "load_mcp_config",
    "open_mcp_tools",
    "parse_mcp_config",
    "tool_name",
]

_CLIENT_NAMES = ("McpError", "McpSession", "McpTools", "open_mcp_tools")


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from lokal.mcp import client

        return getattr(client, name)
    raise AttributeError(f"module 'lokal.mcp' has no attribute {name!r}")
