"""The ``lokal`` command line: ``main`` and the parser; one module per command group
(``decide``, ``run``, ``bench``, ``rag``, ``mcp``, ``memory``, ``serve``, ``trace``), listed in
``COMMANDS``, and the helpers they share in ``common``. Nothing outside this package
imports it."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from lokal.cli.common import (
    EXIT_ANSWERED,
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_INTERRUPTED,
    EXIT_NO_ANSWER,
    BadUsage,
    Parser,
    add_model_arguments,
    read_json_file,
    require_text,
    write_json,
)
from lokal.errors import LokalError

# main and the parser; the shared helpers live in lokal.cli.common and are re-exported here
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


# Every command of lokal, in the order of `lokal --help`: "module:function", where the
# function takes the subparsers of `lokal` and adds its commands (a group such as `rag` adds
# its actions as sub-subcommands). Loaded when the parser is built.
COMMANDS: tuple[str, ...] = (
    "lokal.cli.decide:register",  # decide
    "lokal.cli.run:register",  # run, sandbox
    "lokal.cli.bench:register",  # bench, bfcl
    "lokal.cli.rag:register",  # rag index|ask|search|stats|eval
    "lokal.cli.mcp:register",  # mcp serve|list
    "lokal.cli.memory:register",  # conversations list|show|export|delete, memory ...
    "lokal.cli.serve:register",  # serve
    "lokal.cli.trace:register",  # trace view|export, traces list
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
