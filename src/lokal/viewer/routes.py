"""``lokal serve``'s trace pages: ``GET /traces`` (the stored runs), ``GET /traces/{name}``
(the viewer of one run) and ``GET /traces/{name}/events`` (server-sent events: the run's
events so far, then each new line as the trace grows; the stream ends after the ``final``
event, with an ``end`` event, or when the client leaves).

Each SSE message is ``event: trace``, ``id:`` the line number, ``data:`` the event expanded
(full prompt); a browser that reconnects sends ``Last-Event-ID`` and gets only the lines after
it. When the server has an API key, these routes ask for it too: the header
``Authorization: Bearer KEY``, or once ``/traces?key=KEY``, which sets a cookie for the rest.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sse_starlette.sse import EventSourceResponse

from lokal.paths import traces_dir
from lokal.trace import TraceError
from lokal.viewer.page import build_page, index_page
from lokal.viewer.store import TraceFollower, list_traces, trace_file

__all__ = ["traces_router"]

_COOKIE = "lokal_traces_key"
POLL_SECONDS = 0.2


def traces_router(
    directory: str | Path | None = None,
    *,
    api_key: str | None = None,
    poll_s: float = POLL_SECONDS,
) -> APIRouter:
    """The ``/traces`` routes over ``directory`` (default ``$LOKAL_HOME/traces``, read per
    request)."""
    router = APIRouter()

    def folder() -> Path:
        return Path(directory).expanduser() if directory is not None else traces_dir()

    def allowed(request: Request) -> bool:
        if not api_key:
            return True
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        offered = [
            token.strip() if scheme.lower() == "bearer" else "",
            request.cookies.get(_COOKIE, ""),
            request.query_params.get("key", ""),
        ]
        return any(o and hmac.compare_digest(o.encode(), api_key.encode()) for o in offered)

    def check(request: Request) -> None:
        if not allowed(request):
            raise HTTPException(401, "missing or wrong API key: open /traces?key=KEY once")

    def keyed(request: Request, response: Response) -> Response:
        """Keep a key given in the URL as a cookie (HttpOnly, this site only)."""
        key = request.query_params.get("key")
        if api_key and key and hmac.compare_digest(key.encode(), api_key.encode()):
            response.set_cookie(_COOKIE, key, httponly=True, samesite="strict")
        return response

    def found(name: str) -> Path:
        path = trace_file(name, folder())
        if path is None:
            raise HTTPException(404, f"no stored trace {name!r}")
        return path

    @router.get("/traces", response_class=HTMLResponse)
    async def runs(request: Request) -> Response:
        check(request)
        if "key" in request.query_params:  # the key leaves the address bar at once
            return keyed(request, RedirectResponse("/traces", status_code=303))
        page = index_page(list_traces(folder(), limit=200), folder=str(folder()))
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @router.get("/traces/{name}", response_class=HTMLResponse)
    async def view(name: str, request: Request) -> Response:
        check(request)
        found(name)
        page = build_page(
            [], title=f"lokal · {name}", live={"events_url": f"/traces/{name}/events"}
        )
        return keyed(request, HTMLResponse(page, headers={"Cache-Control": "no-store"}))

    @router.get("/traces/{name}/events")
    async def events(name: str, request: Request) -> Response:
        check(request)
        path = found(name)
        try:
            skip = int(request.headers.get("last-event-id") or 0)
        except ValueError:
            skip = 0
        follower = TraceFollower(path, skip=max(skip, 0))
        return EventSourceResponse(_follow(follower, request, poll_s), ping=15)

    return router


async def _follow(
    follower: TraceFollower, request: Request, poll_s: float
) -> AsyncIterator[dict[str, Any]]:
    while True:
        try:
            lines = follower.poll()
        except (OSError, TraceError) as exc:
            yield {"event": "trace_error", "data": json.dumps({"error": str(exc)})}
            return
        for number, event in lines:
            data = json.dumps(event, ensure_ascii=False, default=str)
            yield {"event": "trace", "id": str(number), "data": data}
        if follower.finished:  # the run's final event is out (or was, before a reconnect)
            yield {"event": "end", "data": "{}"}
            return
        if await request.is_disconnected():
            return
        await asyncio.sleep(poll_s)
