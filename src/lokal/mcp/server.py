"""``lokal mcp serve``: lokal's built-in tools and the sandboxed code execution, offered to
other MCP clients over stdio (the SDK's low-level ``Server``: the tools' own JSON Schemas are
listed as they are, not re-derived from Python signatures).

The file tools are confined to the workspace (``lokal.skills.workspace``): a path outside it,
or a file with more than one hard link (it may be a file from outside), is an error result,
as is a call whose arguments fail the tool's schema (worded by ``ToolSpec.validate``, as in a
ToolMessage). ``code_execution`` runs in the sandbox
(``lokal.skills.sandbox``), with the workspace read-only at ``./workspace``; with ``--skills``
the skills' ``read_skill`` is offered too. A tool's output is returned as text (JSON for
objects) and, when it is an object, also as ``structured_content``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from importlib import metadata
from typing import Any

from lokal.tools.registry import Tool, to_jsonable

__all__ = ["build_server", "lokal_tools", "serve_stdio"]

DEFAULT_TOOL_TIMEOUT = 60.0  # seconds, for a tool without a timeout of its own


def _version() -> str:
    try:
        return metadata.version("lokal")
    except metadata.PackageNotFoundError:
        return ""


@contextlib.contextmanager
def lokal_tools(
    workspace: str | os.PathLike[str] = ".",
    skills: str | os.PathLike[str] | None = None,
    *,
    allow_hard_links: bool = False,
) -> Iterator[list[Tool]]:
    """The tools ``lokal mcp serve`` offers: the built-in tools bound to ``workspace``,
    ``code_execution`` and, with ``skills``, ``read_skill``. Files with more than one hard
    link are refused (and left out of the sandbox's copy) unless ``allow_hard_links``."""
    from lokal.skills.agent_skills import SkillLibrary, skill_tools
    from lokal.skills.builtin import builtin_tools
    from lokal.skills.workspace import Workspace

    ws = Workspace(workspace, allow_hard_links=allow_hard_links)
    tools = builtin_tools(ws)
    with contextlib.ExitStack() as stack:
        if skills is not None:
            tools += skill_tools(SkillLibrary(skills), workspace=ws)
        else:  # code execution without skills: an empty library, code_execution only
            empty = stack.enter_context(tempfile.TemporaryDirectory(prefix="lokal-mcp-"))
            tools += [
                item
                for item in skill_tools(SkillLibrary(empty), workspace=ws)
                if item.name == "code_execution"
            ]
        yield tools


def _error(text: str) -> Any:
    from mcp import types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def build_server(tools: list[Tool], name: str = "lokal") -> Any:
    """An ``mcp.server.lowlevel.Server`` that lists ``tools`` and runs them."""
    import anyio
    from mcp.server.lowlevel import Server

    from mcp import types

    by_name = {item.name: item for item in tools}
    listing = [
        types.Tool(name=item.name, description=item.description, input_schema=item.parameters)
        for item in tools
    ]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: Any) -> Any:
        item = by_name.get(params.name)
        if item is None:
            return _error(f"unknown tool '{params.name}'; available tools: {', '.join(by_name)}")
        args = dict(params.arguments or {})
        problem = item.validate(args)
        if problem is not None:
            return _error(f"invalid arguments for tool '{item.name}': {problem}")
        timeout = item.timeout or DEFAULT_TOOL_TIMEOUT
        try:
            with anyio.fail_after(timeout):
                output = await anyio.to_thread.run_sync(item.run, args, abandon_on_cancel=True)
        except TimeoutError:
            return _error(f"tool '{item.name}' timed out after {timeout:g}s")
        except Exception as exc:
            return _error(f"{type(exc).__name__}: {' '.join(str(exc).split())}")
        output = to_jsonable(output)
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=output if isinstance(output, dict) else None,
        )

    return Server(
        name,
        version=_version(),
        instructions="lokal's workspace tools (file_reader, local_file_search, calculator, "
        "table_analyzer, …) and sandboxed Python (code_execution).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(tools: list[Tool], name: str = "lokal") -> None:
    """Serve ``tools`` over stdin/stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    server = build_server(tools, name)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
