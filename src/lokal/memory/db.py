"""Memory's SQLite file: ``lokal.db`` in the lokal home (``lokal.paths``), and its schema.

Conversations, runs, messages and notes. The file is opened like every SQLite file of lokal
(``lokal.sqlite``: WAL, busy timeout, short explicit transactions, so several processes may
read and append at once); the schema grows by the ordered list ``MIGRATIONS``, whose names
applied are recorded in ``schema_migrations``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lokal.paths import db_path, lokal_home
from lokal.sqlite import applied_migrations, migrate
from lokal.sqlite import connect as open_sqlite

__all__ = ["MIGRATIONS", "applied_migrations", "connect", "db_path", "lokal_home", "migrate"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_conversations",
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created REAL NOT NULL
        );
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            question TEXT NOT NULL,
            profile TEXT,
            started REAL NOT NULL,
            finished REAL,
            status TEXT,
            answer TEXT,
            stop_reason TEXT,
            prompt_tokens INTEGER DEFAULT 0,
            completion_tokens INTEGER DEFAULT 0,
            duration_s REAL,
            summary TEXT
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            run_id INTEGER NOT NULL REFERENCES runs(id),
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            body TEXT NOT NULL,
            created REAL NOT NULL,
            latency_ms REAL,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            UNIQUE (conversation_id, position)
        );
        CREATE INDEX messages_run ON messages(run_id, position);
        """,
    ),
    (
        "002_notes",
        """
        CREATE TABLE notes (
            id INTEGER PRIMARY KEY,
            text TEXT NOT NULL,
            source TEXT NOT NULL,
            created REAL NOT NULL
        );
        """,
    ),
    (
        # AUTOINCREMENT: a deleted note's id is never given to a later note (a plain INTEGER
        # PRIMARY KEY reuses the largest id once it is deleted)
        "003_notes_never_reuse_ids",
        """
        CREATE TABLE notes_new (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            text TEXT NOT NULL,
            source TEXT NOT NULL,
            created REAL NOT NULL
        );
        INSERT INTO notes_new (id, text, source, created)
            SELECT id, text, source, created FROM notes;
        DROP TABLE notes;
        ALTER TABLE notes_new RENAME TO notes;
        """,
    ),
    (
        # the process that writes a run ("host:pid"), so that a run left without a status can
        # be told apart: still going on, or its process gone (killed); see
        # ConversationStore.history
        "004_runs_owner",
        "ALTER TABLE runs ADD COLUMN owner TEXT;",
    ),
    (
        # lokal serve's Responses API (store: true): each response with the conversation it
        # ends (chat messages, JSON), so that previous_response_id continues it
        "005_responses",
        """
        CREATE TABLE responses (
            id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            model TEXT NOT NULL,
            conversation TEXT NOT NULL,
            body TEXT NOT NULL
        );
        """,
    ),
]


def connect(path: str | Path | None = None, migrations=None) -> sqlite3.Connection:
    """Open (and create or migrate) the database; autocommit mode, transactions explicit."""
    path = Path(path) if path is not None else db_path()
    return open_sqlite(path, MIGRATIONS if migrations is None else migrations)
