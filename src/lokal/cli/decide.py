"""``lokal decide``: one decision, messages + tools -> AIMessage."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lokal.cli.common import (
    add_command,
    add_model_arguments,
    add_strategy_argument,
    ensure_output_folder,
    profile_from_args,
    read_json_file,
    strategy_and_backend,
    write_json,
)

__all__ = ["decide_command", "register"]


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
