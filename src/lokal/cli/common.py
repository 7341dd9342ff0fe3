"""What every ``lokal`` command shares: exit codes, the model options, JSON files, one-line
usage errors, and how a command adds itself to the parser. ``lokal.cli`` and the modules of
the subcommands (``lokal.cli.run``, ``lokal.cli.rag``, ``lokal.cli.memory``,
``lokal.cli.bench``) import it; it imports none of them."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from lokal.config import (
    LEGACY_MODES,
    STRATEGIES,
    TOOL_CALLING,
    Profile,
    from_legacy_mode,
    load_profile,
)
from lokal.errors import ConfigError, LokalError

__all__ = [
    "EXIT_ANSWERED",
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES",
    "EXIT_INTERRUPTED",
    "EXIT_NO_ANSWER",
    "BadUsage",
    "Parser",
    "add_command",
    "add_model_arguments",
    "ensure_output_folder",
    "read_json_file",
    "require_text",
    "write_json",
]

EXIT_ANSWERED = 0
EXIT_NO_ANSWER = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`

# The epilog of `lokal --help` and of every subcommand's --help; the README repeats it.
EXIT_CODES = """exit codes: the same for every lokal command
  0    done: an answer written by the model (also the forced final answer after a guard
       such as max_iterations or a repeated call), the passage lokal extracted from a tool
       result or document when the model's replies failed the answer checks, or the
       command's output
  1    stopped without an answer: the model gave no usable reply even without tools and
       there was nothing to extract, the time budget ran out first (the output lists the
       tool results in hand), `rag ask` found nothing in the documents to answer from, or
       (`sandbox`) the script failed
  2    bad input or configuration, reported in one line before any model is loaded: an
       empty question, a missing file or folder, an unknown profile, a bad option value,
       a conversation or note that does not exist
  130  interrupted (Ctrl-C); the trace written so far is kept (`run`: and the run, stored
       as interrupted with its steps so far)
  141  the reader of the output went away (`lokal ... | head`): lokal stops quietly"""


class BadUsage(SystemExit):
    """A command line that argparse refused; its one-line message is already on stderr."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (``lokal memory add: error: ...``)
    and exit code 2, like every other bad input; subcommand parsers are Parsers too."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        print(f"{self.prog}: error: {text} (see {self.prog} --help)", file=sys.stderr)
        raise BadUsage(EXIT_BAD_INPUT)


def add_command(
    commands: argparse._SubParsersAction,
    name: str,
    help_text: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    handler: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """Add ``lokal NAME`` (or ``lokal GROUP NAME``) run by ``handler``."""
    parser = commands.add_parser(name, help=help_text, description=help_text)
    add_arguments(parser)
    parser.set_defaults(handler=handler)
    return parser


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
    if value is None or not value.strip():
        raise ConfigError(f"{what} is empty; give some text")
    return value.strip()


def ensure_output_folder(path: str | Path, option: str, *, folder: bool = False) -> Path:
    """Make the folder an output option writes to (``path``'s parent; ``path`` itself when
    ``folder``), as users expect of an output flag; a ConfigError (exit 2, one line) when it
    cannot be made (a file in the way) or ``path`` is a folder where a file is asked for."""
    path = Path(path).expanduser()
    target = path if folder else path.parent
    if not folder and path.is_dir():
        raise ConfigError(f"{option} {str(path)!r} is a folder; give a file")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{option} {str(path)!r}: {str(target)!r} is a file") from None
    except OSError as exc:
        raise ConfigError(f"{option} {str(path)!r}: cannot make its folder: {exc}") from None
    return path


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def add_profile_arguments(
    parser: argparse.ArgumentParser,
    profile_help: str = "a named profile of model.yaml (--model_name is the same option)",
) -> None:
    """``--model_config`` and ``--profile`` (also spelled ``--model_name``); the profile
    lands in ``args.model_name``."""
    parser.add_argument(
        "--model_config", default=None, help="model.yaml (default configs/model.yaml)"
    )
    parser.add_argument(
        "--profile",
        "--model_name",
        dest="model_name",
        default=None,
        metavar="NAME",
        help=profile_help,
    )


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The profile options (``add_profile_arguments``), ``--tool_calling`` and
    ``--backend``."""
    add_profile_arguments(parser)
    parser.add_argument(
        "--tool_calling",
        "--tool-calling",
        dest="tool_calling",
        choices=TOOL_CALLING,
        default=None,
        help="how tools reach the model (default: the profile's)",
    )
    parser.add_argument(
        "--backend",
        default=None,
        metavar="NAME",
        help="replace the profile's backend (mock: the deterministic mock, no model)",
    )


def profile_from_args(args: argparse.Namespace) -> Profile:
    """The profile the options name, with ``--tool_calling`` and ``--backend`` applied; loaded
    once per command line (the input checks and the command share it). Its ``embeddings:``
    section becomes the process's choice of embedding backend (``lokal.rag.embeddings``)."""
    loaded = vars(args).get("loaded_profile")
    if loaded is None:
        loaded = load_profile(args.model_config, args.model_name, tool_calling=args.tool_calling)
        if args.backend:
            loaded = loaded.with_backend(args.backend)
        args.loaded_profile = loaded
        try:
            from lokal.rag.embeddings import configure
        except ImportError:  # no numpy (lokal without its rag extra): no local embeddings
            pass
        else:
            configure(loaded.embeddings)  # MiniLM of RAG, memory and preselection, as it says
    return loaded


def add_strategy_argument(parser: argparse.ArgumentParser, *, legacy_mode: bool = False) -> None:
    """``--strategy react|plan_execute``; with ``legacy_mode`` also the original command
    lines' ``--mode prompt_json|plan_execute|mock`` (resolved by ``strategy_and_backend``)."""
    parser.add_argument(
        "--strategy", choices=STRATEGIES, default=None, help="how the agent proceeds (react)"
    )
    if legacy_mode:
        parser.add_argument(
            "--mode",
            choices=tuple(LEGACY_MODES),
            default=None,
            help="the original name: prompt_json = --strategy react, plan_execute = "
            "--strategy plan_execute, mock = --backend mock",
        )


def strategy_and_backend(args: argparse.Namespace) -> tuple[str, str | None]:
    """The strategy and the backend override the options ask for (``--mode`` resolved)."""
    strategy, backend = args.strategy, args.backend
    mode = getattr(args, "mode", None)
    if mode is not None:
        legacy_strategy, legacy_backend = from_legacy_mode(mode)
        strategy = strategy or legacy_strategy
        backend = backend or legacy_backend
    return strategy or "react", backend
