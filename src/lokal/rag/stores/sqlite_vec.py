"""The embedded store: one SQLite file with the sqlite-vec extension (``vec0`` table).

The file is opened by ``lokal.sqlite`` (WAL, busy timeout, recorded migrations; ``pysqlite3``
when Python's own ``sqlite3`` cannot load extensions). Its schema: ``meta`` (the vector
dimension), ``chunks``, ``sources`` and the ``vec_chunks`` virtual table; an index built
before migrations were recorded opens as it is (``IF NOT EXISTS`` throughout).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from lokal.errors import LokalError
from lokal.rag.types import Chunk, Hit
from lokal.sqlite import Migration, connect, transaction

__all__ = ["SqliteVecStore", "migrations"]

_COLUMNS = {"source", "heading", "idx"}


def migrations(dim: int) -> list[Migration]:
    """The store's schema; ``dim`` is the vector size of a new file (a file keeps its own)."""

    def vectors(conn: Any) -> None:
        row = conn.execute("SELECT value FROM meta WHERE key='dim'").fetchone()
        if not row:
            conn.execute("INSERT INTO meta VALUES ('dim', ?)", (str(dim),))
        size = int(row[0]) if row else dim
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS vec_chunks USING vec0("
            f"embedding float[{size}] distance_metric=cosine)"
        )

    return [
        (
            "001_chunks",
            """
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE IF NOT EXISTS chunks (
                id INTEGER PRIMARY KEY, source TEXT NOT NULL, idx INTEGER NOT NULL,
                text TEXT NOT NULL, heading TEXT, start INTEGER, end_ INTEGER, metadata TEXT,
                UNIQUE (source, idx));
            CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
            CREATE TABLE IF NOT EXISTS sources (source TEXT PRIMARY KEY, hash TEXT, indexed REAL)
            """,
        ),
        ("002_vec_chunks", vectors),
    ]


def _where_sql(where: dict[str, Any] | None) -> tuple[str, list[Any]]:
    if not where:
        return "", []
    clauses, params = [], []
    for key, value in where.items():
        column = key if key in _COLUMNS else f"json_extract(c.metadata, '$.{key}')"
        if key == "source":
            column = "c.source"
        values = value if isinstance(value, list | tuple | set) else [value]
        clauses.append(f"{column} IN ({','.join('?' * len(values))})")
        params += list(values)
    return " AND ".join(clauses), params


class SqliteVecStore:
    name = "sqlite"

    def __init__(self, path: str | Path, dim: int = 384) -> None:
        import sqlite_vec

        self.path = Path(path)
        self.conn = connect(self.path, migrations(dim), extensions=[sqlite_vec.load])
        self._lock = threading.RLock()
        self.dim = int(self.conn.execute("SELECT value FROM meta WHERE key='dim'").fetchone()[0])

    def add(self, chunks: list[Chunk], vectors: np.ndarray, source_hash: str = "") -> None:
        """Add chunks (a source's old chunks are replaced: delete_source first)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk")
        if len(chunks) and vectors.shape[1] != self.dim:
            raise LokalError(f"vectors have dim {vectors.shape[1]}, this store holds {self.dim}")
        with self._lock, transaction(self.conn.cursor()) as cur:
            for source in {c.source for c in chunks}:
                self._delete(cur, source)
            for chunk, vector in zip(chunks, vectors, strict=True):
                cur.execute(
                    "INSERT INTO chunks (source, idx, text, heading, start, end_, metadata)"
                    " VALUES (?,?,?,?,?,?,?)",
                    (
                        chunk.source,
                        chunk.index,
                        chunk.text,
                        chunk.heading,
                        chunk.start,
                        chunk.end,
                        json.dumps(chunk.metadata, ensure_ascii=False),
                    ),
                )
                cur.execute(
                    "INSERT INTO vec_chunks (rowid, embedding) VALUES (?, ?)",
                    (cur.lastrowid, vector.tobytes()),
                )
            for source in {c.source for c in chunks}:
                cur.execute(
                    "INSERT OR REPLACE INTO sources VALUES (?, ?, ?)",
                    (source, source_hash, time.time()),
                )

    def _delete(self, cur: Any, source: str) -> int:
        ids = [r[0] for r in cur.execute("SELECT id FROM chunks WHERE source=?", (source,))]
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            cur.execute(f"DELETE FROM vec_chunks WHERE rowid IN ({marks})", part)
        cur.execute("DELETE FROM chunks WHERE source=?", (source,))
        cur.execute("DELETE FROM sources WHERE source=?", (source,))
        return len(ids)

    def delete_source(self, source: str) -> int:
        with self._lock, transaction(self.conn.cursor()) as cur:
            return self._delete(cur, source)

    @staticmethod
    def _hit(row: Any, score: float) -> Hit:
        return Hit(
            source=row[0],
            index=row[1],
            text=row[2],
            heading=row[3] or "",
            start=row[4] or 0,
            end=row[5] or 0,
            metadata=json.loads(row[6] or "{}"),
            score=score,
        )

    def query(
        self, vector: np.ndarray, k: int = 5, where: dict[str, Any] | None = None
    ) -> list[Hit]:
        """Top-k by cosine similarity; ``where`` filters on source, heading or metadata keys
        (exact match, a list means any of) and is applied before ranking (exact search)."""
        blob = np.asarray(vector, dtype=np.float32).reshape(-1).tobytes()
        cols = "c.source, c.idx, c.text, c.heading, c.start, c.end_, c.metadata"
        clause, params = _where_sql(where)
        with self._lock:
            if clause:
                rows = self.conn.execute(
                    f"SELECT {cols}, vec_distance_cosine(v.embedding, ?) AS d FROM chunks c"
                    f" JOIN vec_chunks v ON v.rowid = c.id WHERE {clause} ORDER BY d LIMIT ?",
                    (blob, *params, k),
                ).fetchall()
            else:
                rows = self.conn.execute(
                    f"SELECT {cols}, knn.distance FROM (SELECT rowid, distance FROM vec_chunks"
                    f" WHERE embedding MATCH ? AND k = ?) knn JOIN chunks c ON c.id = knn.rowid"
                    f" ORDER BY knn.distance",
                    (blob, k),
                ).fetchall()
        return [self._hit(row, 1.0 - row[7]) for row in rows]

    def chunks(self, where: dict[str, Any] | None = None) -> list[Hit]:
        clause, params = _where_sql(where)
        sql = "SELECT c.source, c.idx, c.text, c.heading, c.start, c.end_, c.metadata FROM chunks c"
        with self._lock:
            rows = self.conn.execute(
                sql + (f" WHERE {clause}" if clause else "") + " ORDER BY c.source, c.idx",
                params,
            ).fetchall()
        return [self._hit(row, 0.0) for row in rows]

    def sources(self) -> dict[str, str]:
        with self._lock:
            return dict(self.conn.execute("SELECT source, hash FROM sources").fetchall())

    def count(self) -> int:
        with self._lock:
            return self.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]

    def persist(self) -> None:
        with self._lock:
            self.conn.commit()
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        with self._lock:
            self.conn.close()
