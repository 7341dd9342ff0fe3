"""``lokal conversations list|show NAME|export NAME`` and ``lokal memory show|add|notes``."""

from __future__ import annotations

import argparse
import json

from lokal.cli import subcommand
from lokal.errors import LokalError


def _conversations_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "show", "export"])
    parser.add_argument("name", nargs="?", help="the conversation (show, export)")
    parser.add_argument("--format", choices=["json", "markdown"], default="json")
    parser.add_argument("--db", default=None, help="the database (default $LOKAL_HOME/lokal.db)")


@subcommand("conversations", "stored conversations: list, show, export", _conversations_arguments)
def conversations_command(args: argparse.Namespace) -> int:
    from lokal.memory.conversations import ConversationStore

    store = ConversationStore(args.db)
    try:
        if args.action == "list":
            rows = store.list()
            if args.format == "json":
                print(json.dumps(rows, ensure_ascii=False, indent=2))
            else:
                for row in rows:
                    print(f"{row['name']}\t{row['runs']} run(s)\t{row['messages']} message(s)")
            return 0
        if not args.name:
            raise LokalError(f"conversations {args.action} needs a NAME")
        if not store.exists(args.name):
            raise LokalError(f"no conversation named {args.name!r}; see `lokal conversations list`")
        fmt = "markdown" if args.action == "show" and args.format == "json" else args.format
        print(store.export(args.name, fmt))
        return 0
    finally:
        store.close()


def _memory_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["show", "notes", "add", "select"])
    parser.add_argument("text", nargs="?", help="the note (add) or the question (select)")
    parser.add_argument("--memory_dir", default=None, help="global memory (*.md)")
    parser.add_argument("--db", default=None)
    parser.add_argument("--k", type=int, default=3)


@subcommand("memory", "global memory and notes: show, notes, add, select", _memory_arguments)
def memory_command(args: argparse.Namespace) -> int:
    from lokal.memory.store import Memory

    memory = Memory(memory_dir=args.memory_dir, db_path=args.db, k=args.k)
    try:
        if args.action == "show":
            print(memory.global_text() or f"(no *.md files in {memory.memory_dir})")
        elif args.action == "notes":
            print(json.dumps(memory.notes(), ensure_ascii=False, indent=2))
        elif args.action == "add":
            if not args.text:
                raise LokalError("memory add needs the note text")
            print(json.dumps({"id": memory.add_note(args.text, source="cli")}))
        else:
            if not args.text:
                raise LokalError("memory select needs a question")
            print(json.dumps(memory.select(args.text), ensure_ascii=False, indent=2))
        return 0
    finally:
        memory.close()
