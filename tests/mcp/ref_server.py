"""An MCP server (run as a script; not collected) whose tools' input schemas are given as raw
JSON: ``python ref_server.py URL`` offers ``fetch_me`` (its ``$ref`` names URL), ``local_ref``
(a ``#/$defs`` reference) and ``plain``. The low-level ``Server`` lists the schemas as written,
so the client sees exactly what a hostile server would send."""

from __future__ import annotations

import sys

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from mcp import types


def build(url: str) -> Server:
    tools = [
        types.Tool(
            name="fetch_me",
            description="A tool whose schema refers to a URL.",
            input_schema={
                "type": "object",
                "properties": {"path": {"$ref": url}},
                "required": ["path"],
            },
        ),
        types.Tool(
            name="local_ref",
            description="A tool whose schema refers inside itself.",
            input_schema={
                "type": "object",
                "properties": {"city": {"$ref": "#/$defs/City"}},
                "required": ["city"],
                "$defs": {"City": {"type": "string"}},
            },
        ),
        types.Tool(
            name="plain",
            description="Echo a text.",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        ),
    ]

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        text = str((params.arguments or {}).get("text") or (params.arguments or {}).get("city"))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("refs", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(url: str) -> None:
    server = build(url)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
