"""Stored responses of ``lokal serve``'s Responses API, in ``lokal.db`` beside the
conversations (``store: true``): each response's body, and the conversation it ends as chat
messages, so that a request naming it in ``previous_response_id`` continues from there."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from lokal.memory.db import connect
from lokal.sqlite import transaction

__all__ = ["ResponseStore"]


class ResponseStore:
    """``put`` a response with its conversation; ``get`` it back (None when unknown)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.conn = connect(path)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.conn.close()

    def put(self, body: dict[str, Any], conversation: list[dict[str, Any]], model: str) -> None:
        row = (
            body["id"],
            time.time(),
            model,
            json.dumps(conversation, ensure_ascii=False),
            json.dumps(body, ensure_ascii=False),
        )
        with self._lock, transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)", row)

    def get(self, ident: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The response's body and its conversation."""
        with self._lock:
            row = self.conn.execute(
                "SELECT body, conversation FROM responses WHERE id=?", (ident,)
            ).fetchone()
        if row is None:
            return None
        return json.loads(row[0]), json.loads(row[1])

    def delete(self, ident: str) -> bool:
        with self._lock, transaction(self.conn):
            gone = self.conn.execute("DELETE FROM responses WHERE id=?", (ident,)).rowcount
        return bool(gone)
