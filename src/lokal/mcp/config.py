"""MCP server configuration: the common ``{"mcpServers": {name: {...}}}`` shape.

A server is either a stdio server started as a child process::

    {"command": "python", "args": ["server.py"], "env": {"TOKEN": "..."}, "cwd": "tools"}

or a streamable-HTTP server reached by URL::

    {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ..."}}

Both take ``timeout`` (seconds per call, default 30) and ``disabled`` (skip the server);
``type`` (``stdio``, ``http``, ``streamable-http``, ``streamableHttp``), written by other
clients, is accepted and checked against the fields given. Any other key is refused with the
key named, so a misspelt ``comand`` is not silently ignored. The file is JSON, or YAML when it
ends in ``.yaml``/``.yml``; the servers may also sit in an ``mcp:`` section
(``{"mcp": {"mcpServers": {...}}}``), so that one config file can hold them beside other
settings.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

from lokal.errors import ConfigError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "McpConfig",
    "McpServerConfig",
    "load_mcp_config",
    "parse_mcp_config",
]

DEFAULT_CALL_TIMEOUT = 30.0

_KNOWN_KEYS = ("command", "args", "env", "cwd", "url", "headers", "timeout", "disabled", "type")
_STDIO_TYPES = {"stdio"}
_HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamablehttp"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class McpServerConfig:
    """One server of the configuration: stdio (``command``) or streamable HTTP (``url``)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    timeout: float = DEFAULT_CALL_TIMEOUT

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        """The command line or the URL, for messages."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return str(self.url)


@dataclasses.dataclass(frozen=True)
class McpConfig:
    """The servers of one configuration, in the order they were written."""

    servers: tuple[McpServerConfig, ...]
    source: str | None = None

    def __iter__(self):
        return iter(self.servers)

    def __len__(self) -> int:
        return len(self.servers)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where} must be a list of strings, got {json.dumps(value)[:80]}")
    return tuple(value)


def _mapping(value: Any, where: str, *, env: bool = False) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of strings, got {json.dumps(value)[:80]}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if env and not _ENV_NAME.match(str(key)):
            raise ConfigError(f"{where}: {key!r} is not an environment variable name")
        if not isinstance(item, str):
            raise ConfigError(f"{where}.{key} must be a string, got {json.dumps(item)[:80]}")
        out[str(key)] = item
    return out


def _server(name: Any, body: Any, where: str) -> McpServerConfig | None:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: a server needs a non-empty name, got {name!r}")
    at = f"{where}.{name}"
    if not isinstance(body, dict):
        raise ConfigError(f"{at} must be an object with 'command' or 'url'")
    unknown = [key for key in body if key not in _KNOWN_KEYS]
    if unknown:
        raise ConfigError(f"{at}: unknown key {unknown[0]!r} (known: {', '.join(_KNOWN_KEYS)})")
    disabled = body.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ConfigError(f"{at}.disabled must be true or false, got {disabled!r}")
    has_command, has_url = "command" in body, "url" in body
    if has_command == has_url:
        what = "both" if has_command else "neither"
        raise ConfigError(
            f"{at}: give either 'command' (a stdio server) or 'url' (a streamable-HTTP "
            f"server), not {what}"
        )
    kind = body.get("type")
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in _STDIO_TYPES | _HTTP_TYPES:
            raise ConfigError(
                f"{at}.type must be 'stdio' or 'http' (streamable HTTP), got {kind!r}"
                + ("; SSE servers are not supported" if kind == "sse" else "")
            )
        if (kind.lower() in _STDIO_TYPES) != has_command:
            raise ConfigError(
                f"{at}.type is {kind!r} but the server has "
                f"{'a command' if has_command else 'a url'}"
            )
    timeout = body.get("timeout", DEFAULT_CALL_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ConfigError(f"{at}.timeout must be a number of seconds above 0, got {timeout!r}")
    if disabled:
        return None
    if has_command:
        for key in ("url", "headers"):
            if key in body:
                raise ConfigError(f"{at}.{key}: a stdio server (with 'command') takes no {key}")
        command = body["command"]
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{at}.command must be a non-empty string, got {command!r}")
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigError(f"{at}.cwd must be a string, got {cwd!r}")
        return McpServerConfig(
            name=name,
            command=command,
            args=_strings(body.get("args", []), f"{at}.args"),
            env=_mapping(body.get("env", {}), f"{at}.env", env=True),
            cwd=cwd,
            timeout=float(timeout),
        )
    for key in ("args", "env", "cwd"):
        if key in body:
            raise ConfigError(f"{at}.{key}: an HTTP server (with 'url') takes no {key}")
    url = body["url"]
    if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError(f"{at}.url must be an http:// or https:// URL, got {url!r}")
    return McpServerConfig(
        name=name,
        url=url,
        headers=_mapping(body.get("headers", {}), f"{at}.headers"),
        timeout=float(timeout),
    )


def parse_mcp_config(data: Any, source: str | None = None) -> McpConfig:
    """The servers of ``{"mcpServers": {...}}`` (or ``{"mcp": {"mcpServers": {...}}}``);
    a ConfigError naming the field for anything else."""
    where = source or "MCP config"
    if isinstance(data, dict) and "mcpServers" not in data and isinstance(data.get("mcp"), dict):
        data = data["mcp"]
        where = f"{where}: mcp"
    if not isinstance(data, dict) or "mcpServers" not in data:
        raise ConfigError(f'{where} must be an object with "mcpServers": {{name: {{...}}}}')
    servers = data["mcpServers"]
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: mcpServers must be an object of servers by name")
    parsed = [_server(name, body, f"{where}: mcpServers") for name, body in servers.items()]
    return McpConfig(tuple(server for server in parsed if server is not None), source)


def load_mcp_config(path: str | Path) -> McpConfig:
    """The servers of a JSON (or YAML) file; ConfigError for a missing or malformed file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"MCP config {str(path)!r} not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # json.JSONDecodeError, yaml.YAMLError
        message = " ".join(str(exc).split())
        raise ConfigError(f"MCP config {str(path)!r} cannot be read: {message}") from None
    return parse_mcp_config(data, str(path))
