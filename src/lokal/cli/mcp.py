"""``lokal mcp serve|config|list``: lokal's tools over MCP (and the client entry that starts
them), and the tools of MCP servers as lokal names them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lokal.cli.common import EXIT_ANSWERED, EXIT_NO_ANSWER, add_command
from lokal.errors import ConfigError

__all__ = ["register"]


def _mcp_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mcp_command", required=True)
    serve = sub.add_parser(
        "serve", help="offer lokal's built-in tools and sandboxed code execution over stdio"
    )
    serve.add_argument("--workspace", default=".", help="folder the file tools may use")
    serve.add_argument("--skills", default=None, help="folder of Agent Skills (SKILL.md)")
    config = sub.add_parser(
        "config",
        help="print the mcpServers entry that runs `lokal mcp serve` for another MCP client, "
        "with absolute paths (works without an activated virtual environment)",
    )
    config.add_argument("--workspace", default=".", help="folder the file tools may use")
    config.add_argument("--skills", default=None, help="folder of Agent Skills (SKILL.md)")
    config.add_argument("--name", default="lokal", help="the server's name in the entry (lokal)")
    listing = sub.add_parser("list", help="the tools each MCP server offers, as lokal names them")
    listing.add_argument("servers", help='servers.json: {"mcpServers": {name: {...}}}')
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    listing.add_argument(
        "--connect_timeout", type=float, default=30.0, help="seconds for a server to start"
    )


def check_mcp_inputs(args: argparse.Namespace) -> None:
    """A ConfigError (exit 2, one line) before any server starts: a workspace or skills
    folder that is not a folder, a servers file that is missing or malformed."""
    if args.mcp_command in ("serve", "config"):
        for option in ("workspace", "skills"):
            value = getattr(args, option, None)
            if value is not None and not Path(value).expanduser().is_dir():
                what = "does not exist" if not Path(value).expanduser().exists() else "is a file"
                raise ConfigError(f"--{option} {value!r} {what}; give a folder")
    else:
        from lokal.mcp.config import load_mcp_config

        if not args.connect_timeout > 0:
            raise ConfigError(f"--connect_timeout must be above 0, got {args.connect_timeout}")
        load_mcp_config(args.servers)


def _serve(args: argparse.Namespace) -> int:
    import anyio

    from lokal.mcp.client import require_sdk
    from lokal.mcp.server import lokal_tools, serve_stdio

    require_sdk()
    with lokal_tools(args.workspace, args.skills) as tools:
        anyio.run(serve_stdio, tools)
    return EXIT_ANSWERED


def server_entry(workspace: str | Path = ".", skills: str | Path | None = None) -> dict:
    """The ``mcpServers`` entry that starts ``lokal mcp serve``: this Python's absolute path
    (``python -m lokal.cli``), so that a client finds lokal and its MCP SDK whatever its PATH."""
    import sys

    args = ["-m", "lokal.cli", "mcp", "serve", "--workspace", str(Path(workspace).resolve())]
    if skills is not None:
        args += ["--skills", str(Path(skills).resolve())]
    return {"command": sys.executable, "args": args}


def _config(args: argparse.Namespace) -> int:
    entry = server_entry(args.workspace, args.skills)
    print(json.dumps({"mcpServers": {args.name: entry}}, ensure_ascii=False, indent=2))
    return EXIT_ANSWERED


def _list(args: argparse.Namespace) -> int:
    from lokal.mcp.client import McpSession

    with McpSession(args.servers, connect_timeout=args.connect_timeout) as session:
        infos, problems = session.infos, session.problems
        started = [name for name in session.servers if session.alive(name)]
    failed = [name for name in session.servers if name not in started]
    if args.json:
        record = {
            "servers": {
                name: {
                    "started": name in started,
                    "tools": [i.to_dict() for i in infos if i.server == name],
                }
                for name in session.servers
            },
            "problems": problems,
        }
        print(json.dumps(record, ensure_ascii=False, indent=2))
    else:
        for name in session.servers:
            mine = [i for i in infos if i.server == name]
            if name not in started:  # the reason is on stderr (a warning of lokal.mcp)
                print(f"{name}: did not start")
                continue
            print(f"{name}: {len(mine)} tool(s)")
            width = max((len(i.name) for i in mine), default=0)
            for info in mine:
                if info.problem:
                    print(f"  {info.name:<{width}}  refused: {info.problem}")
                    continue
                first = (info.description or "").strip().splitlines()
                text = first[0] if first else ""
                shown = f" ({info.remote_name})" if info.remote_name != info.name else ""
                print(f"  {info.name:<{width}}  {text[:90]}{shown}")
    return EXIT_NO_ANSWER if failed else EXIT_ANSWERED


def mcp_command(args: argparse.Namespace) -> int:
    check_mcp_inputs(args)  # before any server starts
    if args.mcp_command == "serve":
        return _serve(args)
    if args.mcp_command == "config":
        return _config(args)
    return _list(args)


def register(commands: argparse._SubParsersAction) -> None:
    """``lokal mcp serve|list``."""
    add_command(
        commands,
        "mcp",
        "MCP: serve lokal's tools over stdio, list the tools of MCP servers",
        _mcp_arguments,
        mcp_command,
    )
