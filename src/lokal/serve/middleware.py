"""The ASGI middleware of ``lokal serve``: one JSON log line per request, and a deadline for
a request's body."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from fastapi.responses import JSONResponse

from lokal.serve import wire

__all__ = ["BodyTimeout", "JsonLog", "LogRequests"]


class JsonLog:
    """One JSON line per request, to a stream (stderr) or a file."""

    def __init__(self, target: str | Path | IO[str] | None = None) -> None:
        self._lock = threading.Lock()
        if target is None:
            self._stream: IO[str] = sys.stderr
        elif isinstance(target, str | Path):
            self._stream = open(target, "a", encoding="utf-8")  # noqa: SIM115 - kept open
        else:
            self._stream = target

    def __call__(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, default=str)
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass


class LogRequests:
    """Pure ASGI middleware: logs each HTTP request as one line when its response ends.
    Handlers add fields to ``scope["lokal_log"]``; headers (and so keys) are never read."""

    def __init__(self, app: Any, log: Callable[[dict[str, Any]], None]) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        entry: dict[str, Any] = {}
        scope["lokal_log"] = entry
        status: dict[str, int] = {}

        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            status.setdefault("code", 500)  # answered by the server-error handler, after this
            entry.setdefault("error", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            client = scope.get("client")
            self.log(
                {
                    "ts": round(time.time(), 3),
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status": status.get("code"),
                    "client": f"{client[0]}:{client[1]}" if client else None,
                    "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                    **entry,
                }
            )


class BodyTimeout:
    """Pure ASGI middleware: a request's body must arrive within ``seconds`` of its headers
    (uvicorn waits for a body forever). ``receive`` is wrapped with that deadline while the
    body is incomplete; past it, the handler reading the body gets a 408 APIError (answered
    in OpenAI's shape with ``Connection: close``), so a client that declares more bytes than
    it sends holds neither the connection nor the handler."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.seconds
        complete = False
        started = False

        async def timed_receive() -> dict:
            nonlocal complete
            if complete:  # the body is in: waiting for a disconnect is not timed
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                complete = True
                raise _body_timeout(self.seconds) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True
            return message

        async def sending(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, sending)
        except wire.APIError as exc:  # raised where no handler answers it
            if started or exc.status != 408:
                raise
            await JSONResponse(exc.body(), status_code=408, headers=exc.headers)(
                scope, receive, send
            )


def _body_timeout(seconds: float) -> wire.APIError:
    return wire.APIError(
        f"the request body did not arrive within {seconds:g} s (lokal serve --body-timeout)",
        status=408,
        code="request_timeout",
        headers={"Connection": "close"},
    )
