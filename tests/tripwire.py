"""A listening socket on 127.0.0.1 that records every connection made to it: tests use it to
prove that lokal does NOT open a URL that a client, a model or a server names."""

from __future__ import annotations

import socket
import threading
from typing import Any


class Tripwire:
    """``with Tripwire() as wire:`` listens on ``wire.port`` (``wire.url(path)``); after the
    block, ``wire.connections`` counts the connections accepted (it must stay 0)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, path: str = "/internal-admin?secret=1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.settimeout(0.5)
            try:
                self.requests.append(conn.recv(4096))
                # a schema, should anyone be fetching one
                conn.sendall(
                    b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"type": "string"}'
                )
            except OSError:
                pass
            finally:
                conn.close()

    def __enter__(self) -> Tripwire:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def tool_with_ref(ref: str, name: str = "read_doc") -> dict[str, Any]:
    """An OpenAI-form tool whose one parameter is ``{"$ref": ref}``."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Read a document.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"$ref": ref}},
                "required": ["path"],
            },
        },
    }
