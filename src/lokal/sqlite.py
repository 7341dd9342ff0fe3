"""The one way lokal opens a SQLite file: memory's ``lokal.db``, the document index and the
embedding caches.

``connect(path, migrations)`` makes the folder and the file and returns a connection in
autocommit mode (transactions are explicit: ``with transaction(conn): ...``), rows as ``Row``
(by index or by name), a WAL journal with a 30 s busy timeout (several processes may read
while one writes), ``synchronous=NORMAL`` and foreign keys on.

The schema grows by an ordered list of named migrations, each applied once, in its own
transaction; the names applied are recorded in ``schema_migrations``. A migration is SQL text
(statements split on ``;``) or a function of the connection (for a schema that depends on a
value, such as the dimension of a vector table). Files made before their migrations were
recorded (a document index or an embedding cache of an older lokal) open as they are: the
first migrations of those files create with ``IF NOT EXISTS`` and are then recorded.

Python's own ``sqlite3`` may be built without extension loading; a file opened with
``extensions`` (sqlite-vec) uses ``pysqlite3`` (the ``pysqlite3-binary`` wheel) then.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from lokal.errors import ConfigError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Migration",
    "applied_migrations",
    "connect",
    "migrate",
    "sqlite3_module",
    "transaction",
]

BUSY_TIMEOUT_MS = 30_000

# (name, SQL text or a function of the connection); names are applied in list order, once.
Migration = tuple[str, str | Callable[[Any], object]]


def sqlite3_module(extensions: bool = False) -> ModuleType:
    """``sqlite3``, or ``pysqlite3`` when extensions are needed and ``sqlite3`` cannot load
    them."""
    import sqlite3

    if not extensions or hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        import pysqlite3  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - depends on the Python build
        raise ConfigError(
            "this Python's sqlite3 cannot load extensions; pip install pysqlite3-binary"
        ) from exc
    return pysqlite3


def connect(
    path: str | Path,
    migrations: Sequence[Migration] = (),
    *,
    extensions: Sequence[Callable[[Any], object]] = (),
) -> Any:
    """Open (create, migrate) the SQLite file at ``path``; ``extensions`` are loaders such as
    ``sqlite_vec.load``, called with the connection before any migration."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = sqlite3_module(extensions=bool(extensions))
    conn = module.connect(
        str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = module.Row
    if extensions:
        conn.enable_load_extension(True)
        for load in extensions:
            load(conn)
        conn.enable_load_extension(False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    _retry(lambda: conn.execute("PRAGMA journal_mode=WAL"), module.OperationalError)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    migrate(conn, migrations)
    return conn


def _retry(action: Callable[[], Any], error: type[Exception], attempts: int = 50) -> Any:
    """``action()``, again while the database is locked (switching to WAL needs a moment
    alone with the file)."""
    for attempt in range(attempts):
        try:
            return action()
        except error as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05)
    return None


@contextmanager
def transaction(conn: Any) -> Iterator[Any]:
    """One ``BEGIN IMMEDIATE`` transaction (waits on the busy timeout for other writers);
    committed at the end of the block, rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def migrate(conn: Any, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations not yet recorded, each in its own transaction; names applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied REAL)"
    )
    applied: list[str] = []
    for name, step in migrations:
        with transaction(conn):
            done = conn.execute("SELECT 1 FROM schema_migrations WHERE name=?", (name,)).fetchone()
            if done:
                continue
            if callable(step):
                step(conn)
            else:
                for statement in (s.strip() for s in step.split(";")):
                    if statement:
                        conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))
            applied.append(name)
    return applied


def applied_migrations(conn: Any) -> list[str]:
    """The names recorded in ``schema_migrations``, sorted."""
    rows = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
    return [row[0] for row in rows]
