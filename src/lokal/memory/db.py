"""The SQLite file behind memory and conversations: where it lives, how it is opened, migrations.

One file, ``lokal.db``, in the lokal home directory: ``$LOKAL_HOME`` if set, else the user
data directory (``platformdirs.user_data_dir("lokal")``). Connections run in WAL mode with a
busy timeout, so several processes may read and append at once; every write is a short
transaction. The schema grows by an ordered list of named migrations; the names applied are
recorded in ``schema_migrations``.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

__all__ = ["MIGRATIONS", "connect", "db_path", "lokal_home"]

BUSY_TIMEOUT_MS = 30_000

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
]


def lokal_home() -> Path:
    """``$LOKAL_HOME``, else the platform's user data directory for lokal."""
    env = os.environ.get("LOKAL_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("lokal", appauthor=False))


def db_path() -> Path:
    return lokal_home() / "lokal.db"


def connect(path: str | Path | None = None, migrations=None) -> sqlite3.Connection:
    """Open (and create or migrate) the database; autocommit mode, transactions explicit."""
    path = Path(path) if path is not None else db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    _retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    migrate(conn, MIGRATIONS if migrations is None else migrations)
    return conn


def _retry(action, attempts: int = 50):
    for attempt in range(attempts):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05)
    return None


def migrate(conn: sqlite3.Connection, migrations: list[tuple[str, str]]) -> list[str]:
    """Apply the migrations not yet recorded, each in its own transaction; names applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied REAL)"
    )
    applied: list[str] = []
    for name, sql in migrations:
        conn.execute("BEGIN IMMEDIATE")
        try:
            done = conn.execute("SELECT 1 FROM schema_migrations WHERE name=?", (name,)).fetchone()
            if not done:
                for statement in (s.strip() for s in sql.split(";")):
                    if statement:
                        conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))
                applied.append(name)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return applied


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
    return [row["name"] for row in rows]
