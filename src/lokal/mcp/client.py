"""Tools of MCP servers as lokal tools: ``McpSession`` (also ``McpTools``) and
``open_mcp_tools``.

One session owns one asyncio event loop, run in a background thread, and one task per server
that holds the server's ``mcp.Client`` open until the session closes (an anyio connection must
be entered and left by the same task). A lokal ``Tool`` is made for every tool a server lists:
named by ``lokal.mcp.naming``, its input schema inlined by ``lokal.mcp.schemas``, its
description kept; its function submits the call to the loop (``run_coroutine_threadsafe``) and
waits for it, so the registry runs MCP tools like any other, in its worker threads.

- stdio servers are child processes that get only the ``env`` of their config plus ``PATH``
  (started through ``env -i``: the SDK would also pass HOME, USER, SHELL, TERM, LOGNAME);
  their stderr goes to a temporary file, whose last lines are quoted when the server fails.
- Each call has the server's ``timeout`` (seconds, default 30). A timeout, an ``is_error``
  result or an exception raises ``McpError``, which the registry turns into an error
  ToolMessage; the run goes on.
- ``structured_content`` is returned when present; else the text of the content blocks (a
  text that is a JSON object or array is returned as that JSON).
- A server that dies (its connection closes) is reported once (a warning, ``reports``, the
  ``on_report`` callback, and the error of the call that found it) and its tools are withdrawn:
  removed from the registries they were registered into, and refused if called anyway.
- A server that does not start is reported in ``problems`` (and a warning) and left out; a
  tool whose schema cannot be used (a recursive ``$ref``) is reported there too and left out.
- ``close()`` (leaving the ``with`` block) stops every server (stdin closed, then SIGTERM and
  SIGKILL to its process group: the SDK's shutdown) and the loop; nothing is left running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from lokal.errors import ConfigError, LokalError
from lokal.mcp.config import McpConfig, McpServerConfig, load_mcp_config, parse_mcp_config
from lokal.mcp.naming import assign_names
from lokal.mcp.schemas import inline_refs
from lokal.tools.registry import Tool, ToolRegistry

__all__ = [
    "McpError",
    "McpSession",
    "McpToolError",
    "McpToolInfo",
    "McpTools",
    "open_mcp_tools",
    "require_sdk",
    "result_output",
]

log = logging.getLogger("lokal.mcp")

CONNECT_TIMEOUT = 30.0  # seconds for a server to start and list its tools
CLOSE_TIMEOUT = 15.0  # the SDK's stdio shutdown takes at most about 6 s per server
_GRACE = 5.0  # added to a call's timeout before the waiting thread gives up
_MAX_PAGES = 100  # tools/list pages read from one server
_STDERR_TAIL = 300  # characters of a failed server's stderr quoted (its last 3 lines)


class McpError(LokalError):
    """An MCP tool call or server failed; the message says which and why."""


class McpToolError(McpError):
    """An MCP tool answered with ``is_error``: the text is the tool's own."""


@dataclasses.dataclass
class McpToolInfo:
    """One tool a server lists, as lokal names it; ``problem`` when it was refused."""

    server: str
    remote_name: str
    name: str
    description: str
    parameters: dict[str, Any] | None = None
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError(
            "MCP needs the mcp package (version 2): pip install 'lokal[mcp]'"
        ) from None


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _one_line(exc.exceptions[0])
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- results --------------------------------------------------------------------------------


def _maybe_json(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            return json.loads(stripped)
    return text


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind}: {getattr(block, 'mime_type', None) or 'unknown type'}, {size} bytes]"
    if kind == "resource_link":
        return f"[resource {block.uri}{': ' + block.name if getattr(block, 'name', None) else ''}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return text if isinstance(text, str) else f"[resource {resource.uri}]"
    return str(block)


def result_output(result: Any, where: str = "MCP tool") -> Any:
    """A ``CallToolResult`` as a tool's return value: ``structured_content`` when present,
    else the content's text; ``McpToolError`` with the tool's text for an ``is_error``
    result."""
    texts = [_block_text(block) for block in (result.content or [])]
    if result.is_error:
        detail = " ".join(" ".join(texts).split()) or "no details given"
        raise McpToolError(f"{where} reported an error: {detail}")
    if result.structured_content is not None:
        return result.structured_content
    if not texts:
        return ""
    if len(texts) == 1:
        return _maybe_json(texts[0])
    return "\n\n".join(texts)


# --- one server -----------------------------------------------------------------------------


class _Server:
    """The state of one server's connection (its client lives on the session's loop)."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.name = config.name
        self.target: Any = None
        self.client: Any = None
        self.remote_tools: list[Any] = []
        self.stop = asyncio.Event()
        self.owner: concurrent.futures.Future[None] | None = None
        self.connected: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self.dead = False
        self.errlog: Any = None
        self.tool_names: list[str] = []

    def stderr_tail(self) -> str:
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            self.errlog.seek(0)
            text = self.errlog.read()
        except (OSError, ValueError):
            return ""
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
        tail = " | ".join(lines[-3:])[-_STDERR_TAIL:]
        return f"; its stderr ends: {tail}" if tail else ""


_THIS_PYTHON = frozenset({"python", "python3"})


def _stdio_parameters(config: McpServerConfig) -> Any:
    """The SDK's parameters for a stdio server: only ``env`` plus PATH reach the child."""
    from mcp import StdioServerParameters

    path = config.env.get("PATH", os.environ.get("PATH", os.defpath))
    env = {"PATH": path, **config.env}
    cwd = None
    if config.cwd is not None:
        cwd = Path(config.cwd).expanduser()
        if not cwd.is_dir():
            raise ConfigError(f"MCP server {config.name!r}: cwd {config.cwd!r} is not a folder")
    command = config.command or ""
    if os.sep in command and cwd is not None and not os.path.isabs(command):
        command = str(cwd / command)
    # "python" is the Python lokal runs in (which has the mcp SDK), not whichever one PATH
    # finds first: outside an activated virtual environment that one lacks the SDK
    executable = sys.executable if command in _THIS_PYTHON else shutil.which(command, path=path)
    if executable is None:
        raise ConfigError(
            f"MCP server {config.name!r}: command {config.command!r} not found"
            + ("" if os.sep in command else " on PATH")
        )
    if os.name != "posix":  # no env -i: the SDK adds its few default variables
        return StdioServerParameters(command=executable, args=list(config.args), env=env, cwd=cwd)
    launcher = shutil.which("env") or "/usr/bin/env"
    if "=" in executable:
        raise ConfigError(f"MCP server {config.name!r}: command path {executable!r} holds '='")
    assignments = [f"{key}={value}" for key, value in env.items()]
    return StdioServerParameters(
        command=launcher, args=["-i", *assignments, executable, *config.args], cwd=cwd
    )


# --- the session ----------------------------------------------------------------------------


class McpSession:
    """The tools of the MCP servers of ``config`` (a path, a parsed ``McpConfig`` or the
    config's dict), for as long as the session is open (see the module docstring).

    ``reserved``: names the tools must not take (tools already registered).
    ``on_report(message)``: called once for each server that dies, from the loop's thread.
    """

    def __init__(
        self,
        config: McpConfig | str | os.PathLike[str] | dict[str, Any],
        *,
        reserved: Iterable[str] = (),
        connect_timeout: float = CONNECT_TIMEOUT,
        on_report: Callable[[str], None] | None = None,
    ) -> None:
        if isinstance(config, dict):
            config = parse_mcp_config(config)
        elif not isinstance(config, McpConfig):
            config = load_mcp_config(config)
        self.config = config
        self.reserved = set(reserved)
        self.connect_timeout = connect_timeout
        self.on_report = on_report
        self.tools: list[Tool] = []
        self.infos: list[McpToolInfo] = []
        self.problems: list[str] = []  # servers that did not start, tools refused
        self.reports: list[str] = []  # servers that died during the session
        self._servers = {server.name: _Server(server) for server in config}
        self._registries: list[ToolRegistry] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._opened = False
        self._closed = False

    # -- lifetime ---------------------------------------------------------------------------
    def __enter__(self) -> McpSession:
        self.open()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def servers(self) -> list[str]:
        """The names of the servers configured (disabled ones left out)."""
        return list(self._servers)

    def alive(self, server: str) -> bool:
        """True while ``server`` is connected."""
        state = self._servers[server]
        return state.client is not None and not state.dead and not self._closed

    def open(self) -> McpSession:
        """Start every server (concurrently), list their tools and make the lokal tools."""
        if self._opened:
            return self
        require_sdk()
        for state in self._servers.values():  # config mistakes before anything starts
            state.target = (
                _stdio_parameters(state.config) if state.config.transport == "stdio" else None
            )
        self._opened = True
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run_loop, args=(loop,), name="lokal-mcp", daemon=True
        )
        self._thread.start()
        try:
            for state in self._servers.values():
                state.owner = asyncio.run_coroutine_threadsafe(self._own(state), loop)
            deadline = time.monotonic() + self.connect_timeout
            for state in self._servers.values():
                problem = None
                try:
                    state.connected.result(timeout=max(0.0, deadline - time.monotonic()))
                except concurrent.futures.TimeoutError:
                    problem = f"it did not answer within {self.connect_timeout:g} s"
                    assert state.owner is not None
                    state.owner.cancel()
                except Exception as exc:
                    problem = _one_line(exc)
                if problem is not None:
                    state.dead = True
                    message = (
                        f"MCP server {state.name!r} ({state.config.describe()}) did not start: "
                        f"{problem}{state.stderr_tail()}"
                    )
                    self.problems.append(message)
                    log.warning("%s", message)
            self._make_tools()
        except BaseException:
            self.close()
            raise
        return self

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())

    async def _own(self, state: _Server) -> None:
        """Hold the server's client open until the session closes (or the server dies)."""
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                if state.config.transport == "stdio":
                    # kept past the connection (its tail is quoted on failure); closed by close()
                    state.errlog = tempfile.TemporaryFile(  # noqa: SIM115
                        "w+", encoding="utf-8", errors="replace"
                    )
                    from mcp.client.stdio import stdio_client

                    target: Any = stdio_client(state.target, errlog=state.errlog)
                elif state.config.headers:
                    import httpx2
                    from mcp.client.streamable_http import streamable_http_client

                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers=state.config.headers,
                            timeout=httpx2.Timeout(30.0, read=300.0),
                        )
                    )
                    target = streamable_http_client(state.config.url or "", http_client=http)
                else:
                    target = state.config.url
                client = await stack.enter_async_context(Client(target))
                tools: list[Any] = []
                cursor = None
                for _ in range(_MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                state.client = client
                state.remote_tools = tools
                state.connected.set_result(True)
                await state.stop.wait()
        except BaseException as exc:
            if not state.connected.done():
                state.connected.set_exception(
                    exc if isinstance(exc, Exception) else McpError("the connection was cancelled")
                )
            elif not isinstance(exc, asyncio.CancelledError):
                log.debug("MCP server %r closed with %s", state.name, _one_line(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            state.client = None

    def close(self) -> None:
        """Withdraw the tools, stop every server and the loop (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for registry in self._registries:
                for item in self.tools:
                    registry.unregister(item.name)
            self._registries.clear()
        loop = self._loop
        if loop is None:
            return
        owners = [state.owner for state in self._servers.values() if state.owner is not None]
        for state in self._servers.values():
            loop.call_soon_threadsafe(state.stop.set)
        _, pending = concurrent.futures.wait(owners, timeout=CLOSE_TIMEOUT)
        for owner in pending:  # a shutdown that hangs: cancel it (the SDK kills on cancel)
            owner.cancel()
        if pending:
            concurrent.futures.wait(pending, timeout=CLOSE_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=CLOSE_TIMEOUT)
        if not loop.is_running():
            loop.close()
        for state in self._servers.values():
            if state.errlog is not None:
                with contextlib.suppress(OSError):
                    state.errlog.close()

    # -- tools ------------------------------------------------------------------------------
    def _make_tools(self) -> None:
        alive = [state for state in self._servers.values() if not state.dead]
        names = assign_names(
            ((state.name, remote.name) for state in alive for remote in state.remote_tools),
            reserved=self.reserved,
        )
        for state in alive:
            for remote in state.remote_tools:
                name = names[(state.name, remote.name)]
                description = remote.description or remote.title or ""
                info = McpToolInfo(state.name, remote.name, name, description)
                self.infos.append(info)
                try:
                    parameters = inline_refs(
                        dict(remote.input_schema or {}), tool=f"{state.name}/{remote.name}"
                    )
                    made = Tool(
                        name=name,
                        description=description,
                        parameters=parameters,
                        func=self._caller(state.name, remote.name),
                        timeout=state.config.timeout + _GRACE,
                    )
                except ConfigError as exc:
                    info.problem = str(exc)
                    message = f"MCP server {state.name!r}: {exc}"
                    self.problems.append(message)
                    log.warning("%s", message)
                    continue
                info.parameters = made.parameters
                self.tools.append(made)
                state.tool_names.append(name)

    def _caller(self, server: str, remote: str) -> Callable[..., Any]:
        def call_mcp_tool(**args: Any) -> Any:
            return self.call(server, remote, args)

        call_mcp_tool.__qualname__ = call_mcp_tool.__name__ = f"mcp:{server}/{remote}"
        return call_mcp_tool

    def register(self, registry: ToolRegistry) -> list[str]:
        """Register the tools in ``registry`` (withdrawn from it again when their server dies
        or the session closes); return their names."""
        with self._lock:
            self._registries.append(registry)
            live = {n for s in self._servers.values() if not s.dead for n in s.tool_names}
            return [registry.register(item).name for item in self.tools if item.name in live]

    # -- calls ------------------------------------------------------------------------------
    def call(self, server: str, tool: str, args: dict[str, Any] | None = None) -> Any:
        """Call ``tool`` (its name on ``server``) and wait for its output; ``McpError`` for
        a timeout, an ``is_error`` result, a failure or a stopped server."""
        state = self._servers.get(server)
        if state is None:
            raise McpError(f"no MCP server named {server!r}")
        if self._closed or self._loop is None:
            raise McpError("the MCP session is closed")
        if state.dead or state.client is None:
            raise McpError(
                f"MCP server {server!r} has stopped; its tools are withdrawn for the rest of "
                "the run"
            )
        timeout = state.config.timeout
        future = asyncio.run_coroutine_threadsafe(
            self._call(state, tool, dict(args or {}), timeout), self._loop
        )
        try:
            return future.result(timeout + _GRACE)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpError(
                f"MCP tool {tool!r} of server {server!r} timed out after {timeout:g}s"
            ) from None
        except concurrent.futures.CancelledError:
            raise McpError(f"MCP tool {tool!r} of server {server!r} was cancelled") from None

    async def _call(self, state: _Server, tool: str, args: dict[str, Any], timeout: float) -> Any:
        import anyio
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        from mcp import MCPError

        where = f"MCP tool {tool!r} of server {state.name!r}"
        client = state.client
        if client is None or state.dead:
            raise McpError(f"MCP server {state.name!r} has stopped")
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool, args, read_timeout_seconds=timeout), timeout + 1
            )
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise McpError(f"{where} timed out after {timeout:g}s") from None
            if exc.code == CONNECTION_CLOSED:
                raise McpError(self._died(state, "its connection closed")) from None
            raise McpError(f"{where} failed: {_one_line(exc)}") from None
        except TimeoutError:
            raise McpError(f"{where} timed out after {timeout:g}s") from None
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise McpError(self._died(state, _one_line(exc))) from None
        except Exception as exc:
            raise McpError(f"{where} failed: {_one_line(exc)}") from None
        return result_output(result, where)

    def _died(self, state: _Server, reason: str) -> str:
        """Withdraw a dead server's tools and report it (once); the message for the call."""
        with self._lock:
            first = not state.dead
            state.dead = True
            names = ", ".join(state.tool_names) or "none"
            message = (
                f"MCP server {state.name!r} stopped ({reason}){state.stderr_tail()}; its tools "
                f"are withdrawn for the rest of the run: {names}"
            )
            if first:
                for registry in self._registries:
                    for name in state.tool_names:
                        registry.unregister(name)
                self.reports.append(message)
        if first:
            state.stop.set()  # on the loop's thread: the owner closes the client and reaps
            log.warning("%s", message)
            if self.on_report is not None:
                try:
                    self.on_report(message)
                except Exception:
                    log.exception("on_report failed")
        return message


McpTools = McpSession


@contextlib.contextmanager
def open_mcp_tools(
    config: McpConfig | str | os.PathLike[str] | dict[str, Any],
    *,
    registry: ToolRegistry | None = None,
    reserved: Iterable[str] = (),
    connect_timeout: float = CONNECT_TIMEOUT,
    on_report: Callable[[str], None] | None = None,
) -> Iterator[list[Tool]]:
    """The lokal tools of the MCP servers of ``config`` (a servers.json path), for the
    ``with`` block; every server is stopped when it ends.

    With ``registry``, the tools are also registered there (their names avoid the tools
    already in it) and withdrawn from it when their server dies or the block ends.
    """
    names = set(reserved) | set(registry.names() if registry is not None else ())
    with McpSession(
        config, reserved=names, connect_timeout=connect_timeout, on_report=on_report
    ) as session:
        if registry is not None:
            session.register(registry)
        yield list(session.tools)
