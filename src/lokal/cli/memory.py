"""``lokal conversations list|show|export|delete`` and
``lokal memory show|notes|add|select|delete``."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from lokal.cli.common import add_command, require_text
from lokal.errors import ConfigError, LokalError


def local_time(epoch: float | None) -> str | None:
    """An epoch timestamp as ISO-8601 local time with its UTC offset, to the second."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


def _cell(value: Any) -> str:
    """A Markdown table cell: pipes escaped, one line."""
    text = "" if value is None else " ".join(str(value).split())
    return text.replace("|", "\\|")


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(" --- " for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def conversation_rows(store: Any) -> list[dict[str, Any]]:
    """``store.list()`` with ``created`` and ``last_run`` as ISO-8601 local times."""
    rows = store.list()
    for row in rows:
        for key in ("created", "last_run"):
            if key in row:
                row[key] = local_time(row[key])
    return rows


def note_rows(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Notes as printed: ``created`` as ISO-8601 local time, not a Unix float."""
    return [
        {**note, "created": local_time(note["created"])} if "created" in note else dict(note)
        for note in notes
    ]


def delete_conversation(store: Any, name: str) -> dict[str, int]:
    """Delete a conversation with its runs and messages, in one transaction; how many of
    each went. A ConfigError (exit 2) when there is no such conversation."""
    counts = store.delete(name)
    if counts is None:
        raise ConfigError(f"no conversation named {name!r}; see `lokal conversations list`")
    return counts


def delete_note(memory: Any, text: str | None) -> int:
    """Delete the note whose id is ``text``; a ConfigError (exit 2) when there is none."""
    text = require_text(text, "the note id")
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(f"a note id is a number, got {text!r}; see `lokal memory notes`")
    note_id = int(text)
    if not memory.delete_note(note_id):
        raise ConfigError(f"no note with id {note_id}; see `lokal memory notes`")
    return note_id


def _db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="the database (default $LOKAL_HOME/lokal.db)")


def _action(
    actions: argparse._SubParsersAction, name: str, help_text: str
) -> argparse.ArgumentParser:
    return actions.add_parser(name, help=help_text, description=help_text)


def _conversations_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = _action(actions, "list", "the stored conversations, with their times")
    listing.add_argument(
        "--format",
        choices=["json", "markdown"],
        default="json",
        help="a JSON list (default) or a Markdown table",
    )
    show = _action(actions, "show", "one conversation, to read")
    show.add_argument("name", help="the conversation")
    show.add_argument(
        "--format", choices=["json", "markdown"], default="markdown", help="default: markdown"
    )
    export = _action(actions, "export", "one conversation, to keep or process")
    export.add_argument("name", help="the conversation")
    export.add_argument(
        "--format", choices=["json", "markdown"], default="json", help="default: json"
    )
    delete = _action(actions, "delete", "a conversation with its runs and messages")
    delete.add_argument("name", help="the conversation")
    for action in (listing, show, export, delete):
        _db_argument(action)


def conversations_command(args: argparse.Namespace) -> int:
    from lokal.memory.conversations import ConversationStore

    store = ConversationStore(args.db)
    try:
        if args.action == "list":
            rows = conversation_rows(store)
            if args.format == "json":
                print(json.dumps(rows, ensure_ascii=False, indent=2))
            else:
                headers = ["name", "runs", "messages", "created", "last run"]
                print(
                    markdown_table(
                        headers,
                        [
                            [r["name"], r["runs"], r["messages"], r["created"], r["last_run"]]
                            for r in rows
                        ],
                    )
                )
            return 0
        name = require_text(args.name, f"conversations {args.action}: the NAME")
        if args.action == "delete":
            counts = delete_conversation(store, name)
            print(json.dumps({"deleted": name, **counts}, ensure_ascii=False))
            return 0
        if not store.exists(name):
            raise LokalError(f"no conversation named {name!r}; see `lokal conversations list`")
        print(store.export(name, args.format))  # show and export: the same, other defaults
        return 0
    finally:
        store.close()


def _memory_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = _action(actions, "show", "the global memory (*.md files)")
    notes = _action(actions, "notes", "every note, as JSON")
    add = _action(actions, "add", "save a note")
    add.add_argument("text", help="the note")
    select = _action(actions, "select", "the notes a question would get")
    select.add_argument("text", metavar="question", help="the question")
    select.add_argument("--k", type=int, default=3, help="at most this many notes")
    delete = _action(actions, "delete", "delete a note")
    delete.add_argument("text", metavar="id", help="the note's id (see `lokal memory notes`)")
    for action in (show, notes, add, select, delete):
        action.add_argument("--memory_dir", default=None, help="global memory (*.md)")
        _db_argument(action)


def memory_command(args: argparse.Namespace) -> int:
    from lokal.memory.store import Memory

    memory = Memory(memory_dir=args.memory_dir, db_path=args.db, k=getattr(args, "k", 3))
    try:
        if args.action == "show":
            print(memory.global_text() or f"(no *.md files in {memory.memory_dir})")
        elif args.action == "notes":
            print(json.dumps(note_rows(memory.notes()), ensure_ascii=False, indent=2))
        elif args.action == "add":
            text = require_text(args.text, "memory add: the note")
            print(json.dumps({"id": memory.add_note(text, source="cli")}))
        elif args.action == "delete":
            print(json.dumps({"deleted": delete_note(memory, args.text)}))
        else:
            question = require_text(args.text, "memory select: the question")
            print(json.dumps(note_rows(memory.select(question)), ensure_ascii=False, indent=2))
        return 0
    finally:
        memory.close()


def register(commands: argparse._SubParsersAction) -> None:
    """``lokal conversations list|show|export|delete`` and
    ``lokal memory show|notes|add|select|delete``."""
    add_command(
        commands,
        "conversations",
        "stored conversations: list, show, export, delete",
        _conversations_arguments,
        conversations_command,
    )
    add_command(
        commands,
        "memory",
        "global memory and notes: show, notes, add, select, delete",
        _memory_arguments,
        memory_command,
    )
