"""``lokal serve``: the OpenAI-compatible server (``lokal.serve``) on uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from lokal.cli.common import add_command, add_model_arguments, profile_from_args
from lokal.errors import ConfigError

__all__ = ["register", "serve_command"]


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (8000)")
    parser.add_argument(
        "--api-key",
        "--api_key",
        dest="api_key",
        default=None,
        metavar="KEY",
        help="require 'Authorization: Bearer KEY' (default: $LOKAL_API_KEY, else no key)",
    )
    parser.add_argument(
        "--max-queue",
        "--max_queue",
        dest="max_queue",
        type=int,
        default=8,
        help="requests that may wait for a local model; more get 429 (8)",
    )
    parser.add_argument(
        "--max-body-bytes",
        "--max_body_bytes",
        dest="max_body_bytes",
        type=int,
        default=4 * 1024 * 1024,
        help="largest request body accepted, in bytes (4 MiB)",
    )
    parser.add_argument(
        "--body-timeout",
        "--body_timeout",
        dest="body_timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds for a request's body to arrive after its headers; later: 408 and the "
        "connection closed (30)",
    )
    parser.add_argument(
        "--log", default=None, metavar="FILE", help="one JSON line per request (default stderr)"
    )
    parser.add_argument(
        "--traces-dir",
        "--traces_dir",
        dest="traces_dir",
        default=None,
        metavar="DIR",
        help="the runs shown at /traces (default $LOKAL_HOME/traces); every request's turn "
        "is kept there as a trace",
    )
    parser.add_argument(
        "--no-traces",
        "--no_traces",
        dest="no_traces",
        action="store_true",
        help="keep no trace of the requests (/traces still shows the runs kept before)",
    )
    parser.add_argument(
        "--prompt-cache-mb",
        "--prompt_cache_mb",
        dest="prompt_cache_mb",
        type=int,
        default=512,
        help="RAM (MB) for saved llama.cpp prompt states, so that clients' conversations each "
        "resume from their own prefix (512; 0: off)",
    )
    parser.add_argument(
        "--conversations",
        action="store_true",
        help="record each request in the conversation store ($LOKAL_HOME/lokal.db), under "
        "the X-Lokal-Conversation header or the request's user field (else 'serve')",
    )
    parser.add_argument(
        "--mcp",
        default=None,
        metavar="FILE",
        help="servers.json: MCP tools the server runs itself, offered beside each request's",
    )


def serve_command(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be between 1 and 65535, got {args.port}")
    if args.max_queue < 0 or args.max_body_bytes < 1 or args.prompt_cache_mb < 0:
        raise ConfigError("--max-queue and --prompt-cache-mb must be >= 0, --max-body-bytes >= 1")
    if not 0 < args.body_timeout < float("inf"):  # also NaN
        raise ConfigError(f"--body-timeout must be > 0 seconds, got {args.body_timeout}")
    profile = profile_from_args(args)  # an unknown profile fails here, before anything loads
    try:
        import uvicorn

        from lokal.serve.app import create_app
    except ImportError as exc:
        raise ConfigError(
            f"lokal serve needs the serve extra ({exc.name} is missing): pip install 'lokal[serve]'"
        ) from None
    api_key = args.api_key or os.environ.get("LOKAL_API_KEY") or None
    with contextlib.ExitStack() as resources:  # MCP servers live as long as the server
        server_tools = None
        if args.mcp:
            from lokal.mcp.client import open_mcp_tools
            from lokal.tools.registry import ToolRegistry

            server_tools = ToolRegistry()
            resources.enter_context(open_mcp_tools(args.mcp, registry=server_tools))
        store = None
        if args.conversations:
            from lokal.memory.conversations import ConversationStore

            store = ConversationStore()
            resources.callback(store.close)
        app = create_app(
            args.model_config,
            profile=args.model_name or profile.name,
            backend_name=args.backend,
            tool_calling=args.tool_calling,
            api_key=api_key,
            max_queue=args.max_queue,
            max_body_bytes=args.max_body_bytes,
            body_timeout=args.body_timeout,
            log=args.log,
            server_tools=server_tools,
            traces_dir=args.traces_dir,
            keep_traces=not args.no_traces,
            conversations=store,
            prompt_cache_mb=args.prompt_cache_mb,
        )
        where = f"http://{args.host}:{args.port}/v1"
        tools = f"; server tools: {', '.join(server_tools.names())}" if server_tools else ""
        print(
            f"lokal serve: {where} (models: {', '.join(app.state.names) or 'none'}; "
            f"key {'required' if api_key else 'not required'}{tools})",
            file=sys.stderr,
        )
        for name, reason in getattr(app.state, "unavailable", {}).items():  # a request: 404
            print(f"lokal serve: not serving {name}: {reason}", file=sys.stderr)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    add_command(
        commands,
        "serve",
        "an OpenAI-compatible server: chat completions with well-formed tool calls",
        _serve_arguments,
        serve_command,
    )
