"""The ``lokal`` command: ``decide``, and the subcommands each part of lokal registers."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lokal.errors import LokalError

__all__ = ["EXIT_CODES", "main"]

EXIT_ANSWERED = 0
EXIT_NO_ANSWER = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`

# The epilog of `lokal --help` and of every subcommand's --help; the README repeats it.
EXIT_CODES = """exit codes: the same for every lokal command
  0    done: an answer written by the model (also the forced final answer after a guard
       such as max_iterations or a repeated call), or the command's output
  1    stopped without an answer: the model gave no usable reply even without tools, the
       time budget ran out first (the output lists the tool results in hand), `rag ask`
       found nothing in the documents to answer from, or (`sandbox`) the script failed
  2    bad input or configuration, reported in one line before any model is loaded: an
       empty question, a missing file or folder, an unknown profile, a bad option value,
       a conversation or note that does not exist
  130  interrupted (Ctrl-C); the trace written so far is kept
  141  the reader of the output went away (`lokal ... | head`): lokal stops quietly"""

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
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LokalError(f"{what} file {path} is not valid JSON: {exc}") from exc


def require_text(value: str | None, what: str) -> str:
    """``value`` stripped; a ConfigError (exit 2) when it is missing, empty or blank."""
    from lokal.errors import ConfigError

    if value is None or not value.strip():
        raise ConfigError(f"{what} is empty; give some text")
    return value.strip()


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
    parser.add_argument("--quiet", action="store_true", help="no live progress on stderr")


@subcommand("decide", "one decision: messages + tools → AIMessage", _decide_arguments)
def decide_command(args: argparse.Namespace) -> int:
    from lokal.config import announce, load_profile
    from lokal.live import working
    from lokal.llm.decide import generate_ai_message

    messages = read_json_file(args.messages, "messages")
    tools = read_json_file(args.tools_schema, "tools_schema") if args.tools_schema else []
    profile = load_profile(args.model_config, args.model_name, tool_calling=args.tool_calling)
    announce(profile, mode=args.mode)
    with working("deciding", quiet=args.quiet):
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
    _with_exit_codes(parser)
    return parser


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
