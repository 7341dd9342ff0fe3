"""The ``lokal`` command: ``decide``, and the commands listed in ``COMMANDS``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from lokal.cli_common import (
    EXIT_ANSWERED,
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_INTERRUPTED,
    EXIT_NO_ANSWER,
    BadUsage,
    Parser,
    add_command,
    add_model_arguments,
    add_strategy_argument,
    ensure_output_folder,
    profile_from_args,
    read_json_file,
    require_text,
    strategy_and_backend,
    write_json,
)
from lokal.errors import LokalError

# main and the parser; the shared helpers live in lokal.cli_common and are re-exported here
# for code that took them from lokal.cli before
__all__ = [
    "COMMANDS",
    "EXIT_ANSWERED",
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES",
    "EXIT_INTERRUPTED",
    "EXIT_NO_ANSWER",
    "add_model_arguments",
    "build_parser",
    "main",
    "read_json_file",
    "require_text",
    "write_json",
]


def _decide_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--messages", required=True, help="JSON list of messages")
    parser.add_argument("--tools_schema", default=None, help="JSON list of tools")
    add_strategy_argument(parser, legacy_mode=True)
    parser.add_argument("--outdir", default=None, help="write ai_message.json, result.json …")
    parser.add_argument("--quiet", action="store_true", help="no live progress on stderr")


def decide_command(args: argparse.Namespace) -> int:
    from lokal.config import announce
    from lokal.live import working
    from lokal.llm.decide import generate_ai_message

    messages = read_json_file(args.messages, "messages")
    tools = read_json_file(args.tools_schema, "tools_schema") if args.tools_schema else []
    strategy, backend = strategy_and_backend(args)
    if args.outdir:  # made before the model loads, so that a bad folder costs nothing
        ensure_output_folder(args.outdir, "--outdir", folder=True)
    args.backend = backend
    profile = profile_from_args(args)
    if not args.quiet:  # --quiet: nothing on stderr but errors
        announce(profile)
    with working("deciding", quiet=args.quiet):
        result = generate_ai_message(profile, messages, tools, strategy=strategy)
    if args.outdir:
        outdir = Path(args.outdir)
        outdir.mkdir(parents=True, exist_ok=True)
        write_json(outdir / "ai_message.json", result.ai_message)
        (outdir / "raw_output.txt").write_text(result.raw_text, encoding="utf-8")
        write_json(outdir / "prompt.json", result.prompt)
        write_json(outdir / "result.json", result.to_dict())
    if result.ok:
        print(json.dumps(result.ai_message, ensure_ascii=False, indent=2))
        return 0
    error = result.error.to_dict() if result.error else None
    print(json.dumps({"status": "error", "error": error}, ensure_ascii=False, indent=2))
    return 1


def register(commands: argparse._SubParsersAction) -> None:
    add_command(
        commands,
        "decide",
        "one decision: messages + tools → AIMessage",
        _decide_arguments,
        decide_command,
    )


# Every command of lokal, in the order of `lokal --help`: "module:function", where the
# function takes the subparsers of `lokal` and adds its commands (a group such as `rag` adds
# its actions as sub-subcommands). Loaded when the parser is built.
COMMANDS: tuple[str, ...] = (
    "lokal.cli:register",  # decide
    "lokal.cli_run:register",  # run, sandbox
    "lokal.bench.cli:register",  # bench, bfcl
    "lokal.cli_rag:register",  # rag index|ask|search|stats|eval
    "lokal.cli_mcp:register",  # mcp serve|list
    "lokal.memory.cli:register",  # conversations list|show|export|delete, memory ...
    "lokal.cli_serve:register",  # serve
    "lokal.cli_trace:register",  # trace view|export, traces list
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="lokal", description="A local-first agent runtime for small language models."
    )
    parser.add_argument("--version", action=_Version, help="print lokal's version and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    for entry in COMMANDS:
        module, _, function = entry.partition(":")
        getattr(importlib.import_module(module), function)(commands)
    _with_exit_codes(parser)
    return parser


class _Version(argparse.Action):
    """``lokal --version``: ``lokal X.Y.Z`` on stdout, exit 0 (the version is looked up only
    then: importlib.metadata is slow to import)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from lokal import __version__

        print(f"lokal {__version__}")
        parser.exit(0)


def _with_exit_codes(parser: argparse.ArgumentParser) -> None:
    """EXIT_CODES as the epilog of ``parser`` and of its nested subcommands (``rag ask``)."""
    parser.epilog = EXIT_CODES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _with_exit_codes(child)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {str(exc.filename)!r}"
    return " ".join(str(exc).split()) or type(exc).__name__


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so that flushing what is still
    buffered at exit raises nothing (the recipe in the docs of Python's signal module)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (tests)
        pass


def main(argv: list[str] | None = None) -> int:
    """Run one ``lokal`` command; the return value is its exit code (see EXIT_CODES)."""
    try:
        args = build_parser().parse_args(argv)
    except BadUsage:  # one line on stderr already
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("lokal: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows up here, not as a traceback at exit
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (LokalError, OSError) as exc:  # OSError: a file or folder that cannot be used
        print(f"lokal {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"lokal {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
