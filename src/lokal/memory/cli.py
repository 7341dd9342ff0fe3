"""``lokal conversations list|show|export|delete`` and
``lokal memory show|notes|add|select|delete``."""

from __future__ import annotations

import argparse
import json
import sqlite3
from datetime import datetime
from typing import Any

from lokal.cli import require_text, subcommand
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


def delete_conversation(store: Any, name: str) -> dict[str, int]:
    """Delete a conversation with its runs and messages, in one transaction; how many of
    each went. A ConfigError (exit 2) when there is no such conversation."""

    def delete(conn: sqlite3.Connection) -> dict[str, int]:
        row = conn.execute("SELECT id FROM conversations WHERE name=?", (name,)).fetchone()
        if row is None:
            raise ConfigError(f"no conversation named {name!r}; see `lokal conversations list`")
        conv = row[0]
        messages = conn.execute("DELETE FROM messages WHERE conversation_id=?", (conv,)).rowcount
        runs = conn.execute("DELETE FROM runs WHERE conversation_id=?", (conv,)).rowcount
        conn.execute("DELETE FROM conversations WHERE id=?", (conv,))
        return {"runs": runs, "messages": messages}

    return store._write(delete)


def delete_note(memory: Any, text: str | None) -> int:
    """Delete the note whose id is ``text``; a ConfigError (exit 2) when there is none."""
    text = require_text(text, "the note id")
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(f"a note id is a number, got {text!r}; see `lokal memory notes`")
    note_id = int(text)

    def delete(conn: sqlite3.Connection) -> int:
        return conn.execute("DELETE FROM notes WHERE id=?", (note_id,)).rowcount

    if not memory.store._write(delete):
        raise ConfigError(f"no note with id {note_id}; see `lokal memory notes`")
    return note_id


def _conversations_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "show", "export", "delete"])
    parser.add_argument("name", nargs="?", help="the conversation (show, export, delete)")
    parser.add_argument(
        "--format",
        choices=["json", "markdown"],
        default="json",
        help="list: JSON or a Markdown table; export: JSON or Markdown (show: Markdown)",
    )
    parser.add_argument("--db", default=None, help="the database (default $LOKAL_HOME/lokal.db)")


@subcommand(
    "conversations", "stored conversations: list, show, export, delete", _conversations_arguments
)
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
        if not args.name:
            raise ConfigError(f"conversations {args.action} needs a NAME")
        if args.action == "delete":
            counts = delete_conversation(store, args.name)
            print(json.dumps({"deleted": args.name, **counts}, ensure_ascii=False))
            return 0
        if not store.exists(args.name):
            raise LokalError(f"no conversation named {args.name!r}; see `lokal conversations list`")
        fmt = "markdown" if args.action == "show" and args.format == "json" else args.format
        print(store.export(args.name, fmt))
        return 0
    finally:
        store.close()


def _memory_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["show", "notes", "add", "select", "delete"])
    parser.add_argument(
        "text", nargs="?", help="the note (add), the question (select) or a note's id (delete)"
    )
    parser.add_argument("--memory_dir", default=None, help="global memory (*.md)")
    parser.add_argument("--db", default=None)
    parser.add_argument("--k", type=int, default=3)


@subcommand(
    "memory", "global memory and notes: show, notes, add, select, delete", _memory_arguments
)
def memory_command(args: argparse.Namespace) -> int:
    from lokal.memory.store import Memory

    memory = Memory(memory_dir=args.memory_dir, db_path=args.db, k=args.k)
    try:
        if args.action == "show":
            print(memory.global_text() or f"(no *.md files in {memory.memory_dir})")
        elif args.action == "notes":
            print(json.dumps(memory.notes(), ensure_ascii=False, indent=2))
        elif args.action == "add":
            text = require_text(args.text, "memory add: the note")
            print(json.dumps({"id": memory.add_note(text, source="cli")}))
        elif args.action == "delete":
            print(json.dumps({"deleted": delete_note(memory, args.text)}))
        else:
            question = require_text(args.text, "memory select: the question")
            print(json.dumps(memory.select(question), ensure_ascii=False, indent=2))
        return 0
    finally:
        memory.close()
