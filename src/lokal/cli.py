"""The ``lokal`` command: ``decide``, and the subcommands each part of lokal registers."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lokal.errors import LokalError

__all__ = ["main"]

# name -> (add_arguments, handler, help); each part of lokal adds its own subcommand here.
Subcommand = tuple[
    Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int], str
]
_SUBCOMMANDS: dict[str, Subcommand] = {}


def subcommand(name: str, help_text: str, add_arguments: Callable[[argparse.ArgumentParser], None]):
    """Register ``handler`` as ``lokal NAME``."""

    def decorate(handler: Callable[[argparse.Namespace], int]):
        _SUBCOMMANDS[name] = (add_arguments, handler, help_text)
        return handler

    return decorate


def read_json_file(path: str | Path, what: str) -> Any:
    """JSON from ``path``; a clear error for a missing or malformed file."""
    path = Path(path)
    if not path.is_file():
        raise LokalError(f"{what} file {str(path)!r} not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LokalError(f"{what} file {path} is not valid JSON: {exc}") from exc


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model_config", default=None, help="model.yaml (default configs/model.yaml)"
    )
    parser.add_argument("--model_name", default=None, help="a named profile of model.yaml")
    parser.add_argument(
        "--tool_calling",
        choices=["prompt_json", "builtin", "constrained", "staged"],
        default=None,
        help="how tools reach the model (default: the profile's)",
    )


def _decide_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--messages", required=True, help="JSON list of messages")
    parser.add_argument("--tools_schema", default=None, help="JSON list of tools")
    parser.add_argument(
        "--mode", choices=["prompt_json", "plan_execute", "mock"], default="prompt_json"
    )
    parser.add_argument("--outdir", default=None, help="write ai_message.json, result.json …")


@subcommand("decide", "one decision: messages + tools → AIMessage", _decide_arguments)
def decide_command(args: argparse.Namespace) -> int:
    from lokal.config import announce, load_profile
    from lokal.llm.decide import generate_ai_message

    messages = read_json_file(args.messages, "messages")
    tools = read_json_file(args.tools_schema, "tools_schema") if args.tools_schema else []
    profile = load_profile(args.model_config, args.model_name, tool_calling=args.tool_calling)
    announce(profile)
    result = generate_ai_message(profile, messages, tools, mode=args.mode)
    if args.outdir:
        outdir = Path(args.outdir)
        outdir.mkdir(parents=True, exist_ok=True)
        write_json(outdir / "ai_message.json", result["ai_message"])
        (outdir / "raw_output.txt").write_text(result["raw_text"], encoding="utf-8")
        write_json(outdir / "prompt.json", result["prompt"])
        write_json(outdir / "result.json", result)
    if result["status"] == "success":
        print(json.dumps(result["ai_message"], ensure_ascii=False, indent=2))
        return 0
    print(json.dumps({"status": "error", "error": result["error"]}, ensure_ascii=False, indent=2))
    return 1


# Modules that register further subcommands with @subcommand when imported.
_COMMAND_MODULES: tuple[str, ...] = (
    "lokal.cli_run",
    "lokal.bench.cli",
    "lokal.rag.cli",
    "lokal.memory.cli",
)


def _load_subcommands() -> None:
    for module in _COMMAND_MODULES:
        __import__(module)


def build_parser() -> argparse.ArgumentParser:
    _load_subcommands()
    parser = argparse.ArgumentParser(
        prog="lokal", description="A local-first agent runtime for small language models."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, (add_arguments, handler, help_text) in _SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        add_arguments(sub)
        sub.set_defaults(handler=handler)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (LokalError, FileNotFoundError) as exc:
        print(f"lokal {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"lokal {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
