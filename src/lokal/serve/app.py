"""The ASGI app of ``lokal serve``: OpenAI's chat completions on lokal's decision engine.

``create_app(config)`` serves every profile of a model.yaml (or one ``Profile``). A request
names its profile in ``model``; its decision is ``generate_ai_message`` with the request's
``tool_choice``, ``parallel_tool_calls`` and ``response_format``, so that a reply's calls are
parsed, validated against the tools' schemas and retried before any client sees them.

Concurrency: requests for a model loaded in this process take turns (one generation at a
time) in a bounded queue (``max_queue``; beyond it, 429 with ``Retry-After``); a profile on a
remote server (backend ``openai``: vLLM, Ollama, llama.cpp's server) runs up to
``remote_concurrency`` requests at once. A client that goes away frees its place in the
queue at once, and a generation under way stops at its next token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from lokal.config import Profile, load_profile, read_config
from lokal.errors import ConfigError, LokalError
from lokal.llm.backends import Backend, get_backend
from lokal.memory.conversations import ConversationStore
from lokal.messages import last_user_text, make_ai_message
from lokal.progress import listening, report
from lokal.records import Decision, Usage
from lokal.serve import wire
from lokal.serve.slots import QueueFull, Slots
from lokal.serve.stream import ContentStreamer, chunk, sse_data, tool_call_chunks
from lokal.tools.registry import ToolRegistry
from lokal.tools.schema import tool_specs
from lokal.viewer.routes import traces_router

SERVER_TOOL_ROUNDS = 4  # decisions that may call the server's own tools, per request

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_QUEUE",
    "JsonLog",
    "create_app",
    "served_names",
]

DEFAULT_MAX_QUEUE = 8
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0  # seconds for a request's whole body to arrive
REMOTE_BACKENDS = frozenset({"openai"})
_POLL_SECONDS = 0.1  # how often a waiting request checks that its client is still there


class _Cancelled(Exception):
    """The client went away: the generation under way stops at its next token."""


class _ClientGone(Exception):
    pass


class _Reporting:
    """A backend that tells the progress listener when a generation writing a whole reply
    starts (``streamable``; not the argument steps of a staged decision, which continue a
    prefix), so that the stream knows where a reply's text begins."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def generate(self, request: Any) -> Any:
        report(phase="reply", streamable=not request.prefix)
        return self._inner.generate(request)


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


class _LogRequests:
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


class _BodyTimeout:
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


def served_names(
    config: str | Path | dict | Profile | None, default: str | None = None
) -> list[str]:
    """The profiles served, the default first."""
    if isinstance(config, Profile):
        return [config.name]
    data = config if isinstance(config, dict) else read_config(_config_path(config))
    base = (data.get("model") or {}).get("name") or "default"
    names = [default or base]
    for name in [base, *(data.get("models") or {})]:
        if name not in names:
            names.append(name)
    return names


def _config_path(config: str | Path | None) -> Path:
    from lokal.config import default_config_path

    return Path(config) if config is not None else default_config_path()


def create_app(
    config: str | Path | dict | Profile | None = None,
    *,
    profile: str | None = None,
    backend: Backend | None = None,
    backend_name: str | None = None,
    tool_calling: str | None = None,
    api_key: str | None = None,
    max_queue: int = DEFAULT_MAX_QUEUE,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
    remote_concurrency: int = 16,
    log: Callable[[dict[str, Any]], None] | str | Path | None = None,
    server_tools: ToolRegistry | None = None,
    traces_dir: str | Path | None = None,
    conversations: ConversationStore | None = None,
    prompt_cache_mb: int | None = None,
) -> FastAPI:
    """The app serving ``config`` (a model.yaml path or mapping, or one Profile).

    ``profile`` is the default profile (listed first); ``backend`` replaces every profile's
    backend with an instance (tests: a ScriptedBackend); ``backend_name`` and
    ``tool_calling`` override every profile's. ``api_key``: requests without ``Authorization:
    Bearer <key>`` get 401. ``body_timeout``: seconds for a request's body to arrive after
    its headers, else 408 and the connection closed (None: no limit). ``log``: a callable
    taking each request's entry, or a file path (default: one JSON line per request on
    stderr). ``server_tools``: tools the server runs
    itself (``lokal serve --mcp``): offered to the model beside the request's tools; a reply
    that calls them is answered by running them and deciding again, and the client sees only
    its own tools' calls or the answer (the server's runs are listed in ``lokal.server_tools``).
    ``traces_dir``: the runs shown at ``/traces`` (default ``$LOKAL_HOME/traces``).
    ``conversations``: record each request (its last user message, the reply, tokens and
    latency) as a run of the conversation the request names (the ``X-Lokal-Conversation``
    header, else the request's ``user`` field, else ``serve``). ``prompt_cache_mb``: RAM for
    saved llama.cpp prompt states, so that the conversations of different clients each resume
    from their own prefix (overrides the profiles' ``model.prompt_cache_mb``).
    """
    source = config if isinstance(config, dict | Profile) else _config_path(config)
    names = served_names(source, profile)
    if isinstance(source, Profile) and tool_calling:
        source = source.with_tool_calling(mode=tool_calling)
    base_name = names[0] if isinstance(source, Profile) else served_names(source)[0]
    logger = log if callable(log) else JsonLog(log)
    profiles: dict[str, Profile] = {}
    engines: dict[int, tuple[_Reporting, Slots]] = {}
    executor = ThreadPoolExecutor(max_workers=remote_concurrency + 4, thread_name_prefix="lokal")

    def load(name: str) -> Profile:
        if name not in profiles:
            if isinstance(source, Profile):
                loaded = source
            else:
                data = source if isinstance(source, dict) else read_config(source)
                listed = name in (data.get("models") or {})
                loaded = load_profile(source, name if listed else None, tool_calling=tool_calling)
                if not listed and name != base_name:
                    raise ConfigError(f"unknown profile {name!r}")
            if backend_name:
                loaded = loaded.with_backend(backend_name)
            if prompt_cache_mb is not None:
                model = loaded.model.model_copy(update={"prompt_cache_mb": prompt_cache_mb})
                loaded = loaded.replace(model=model)
            profiles[name] = loaded
        return profiles[name]

    resolved: dict[str, tuple[_Reporting, Slots]] = {}  # a profile's, once it is loaded

    def engine_for(chosen: Profile) -> tuple[_Reporting, Slots]:
        inner = backend if backend is not None else get_backend(chosen)
        key = id(inner)
        if key not in engines:
            remote = backend is None and chosen.backend in REMOTE_BACKENDS
            slots = Slots(remote_concurrency if remote else 1, max_queue)
            engines[key] = (_Reporting(inner), slots)
        resolved[chosen.name] = engines[key]
        return engines[key]

    # profiles that cannot load here (a model folder or file that is not there, a backend's
    # package not installed) are not listed, and a request for one is a 404 the SDKs do not
    # retry; found cheaply now, without loading any model
    unavailable: dict[str, str] = {}
    if backend is None:
        for name in list(names):
            try:
                reason = _unavailable(load(name))
            except LokalError as exc:
                reason = str(exc)
            if reason is not None:
                unavailable[name] = reason
        names = [name for name in names if name not in unavailable]

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        # what every request of a profile uses is loaded before the first one comes
        served = []
        for name in names:
            with contextlib.suppress(LokalError):  # a request for it says why
                served.append(load(name))
        await asyncio.to_thread(_load_at_start, served, backend, logger)
        yield

    app = FastAPI(
        title="lokal serve", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.state.names = names
    app.state.unavailable = unavailable
    app.state.engines = engines
    app.include_router(traces_router(traces_dir, api_key=api_key))  # /traces: docs/tracing.md

    def authorize(request: Request) -> None:
        if not api_key:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), api_key.encode()
        ):
            raise wire.APIError(
                "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                status=401,
                code="invalid_api_key",
            )

    @app.exception_handler(wire.APIError)
    async def api_error(request: Request, exc: wire.APIError) -> JSONResponse:
        entry = request.scope.get("lokal_log")
        if entry is not None:
            entry["error"] = exc.message if exc.status != 401 else "unauthorized"
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        body = wire.error_body(str(exc.detail), "invalid_request_error")
        return JSONResponse(body, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        entry = request.scope.get("lokal_log")
        if entry is not None:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        body = wire.error_body(f"internal error: {type(exc).__name__}", "server_error")
        # Starlette raises the exception again after this reply, and uvicorn then closes the
        # connection: the client is told so, rather than finding it closed under its next request
        return JSONResponse(body, status_code=500, headers={"Connection": "close"})

    @app.get("/health")
    async def health(request: Request) -> dict[str, Any]:
        # answered without the key, as llama.cpp's server and vLLM do (orchestrators probe
        # it without credentials); the models and queues only to a request with the key
        try:
            authorize(request)
        except wire.APIError:
            return {"status": "ok"}
        return {
            "status": "ok",
            "models": names,
            "unavailable": unavailable,
            "queues": [slots.state() for _, slots in engines.values()],
        }

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        authorize(request)
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "lokal"} for name in names
            ],
        }

    @app.get("/v1/models/{name}")
    async def model(name: str, request: Request) -> dict[str, Any]:
        authorize(request)
        if name not in names:
            raise _model_not_found(name, names, unavailable)
        return {"id": name, "object": "model", "created": 0, "owned_by": "lokal"}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        entry = request.scope.setdefault("lokal_log", {})
        authorize(request)
        try:
            body = await _read_body(request, max_body_bytes)
        except ClientDisconnect:  # the client left before its body was in
            entry["disconnected"] = "sending"
            return Response(status_code=499)
        parsed = wire.parse_request(body)
        entry.update(model=parsed.model, stream=bool(parsed.stream))
        if parsed.model not in names:
            raise _model_not_found(parsed.model, names, unavailable)
        try:
            chosen = load(parsed.model)
        except LokalError as exc:
            raise wire.APIError(f"model {parsed.model!r}: {exc}", param="model") from None
        prepared = wire.prepare(parsed, chosen)
        loop = asyncio.get_running_loop()
        try:
            # loading a model blocks: in a worker thread, once; then no thread hop
            known = resolved.get(chosen.name)
            engine, slots = known or await loop.run_in_executor(executor, engine_for, chosen)
        except LokalError as exc:  # found only when loading: not retried, and not listed again
            unavailable[parsed.model] = str(exc)
            if parsed.model in names:
                names.remove(parsed.model)
            raise wire.APIError(
                f"model {parsed.model!r} cannot be loaded: {exc}",
                status=500,
                type="server_error",
                code="model_not_loadable",
                headers={"x-should-retry": "false"},
            ) from None
        waited = time.perf_counter()
        try:
            await _acquire(request, slots)
        except QueueFull as exc:
            entry["queue"] = slots.state()
            raise wire.APIError(
                f"the model is busy and its queue is full ({slots.max_queue} waiting); "
                f"retry after {exc.retry_after} s",
                status=429,
                type="rate_limit_error",
                code="queue_full",
                headers={
                    "Retry-After": str(exc.retry_after),
                    "retry-after-ms": str(exc.retry_after_ms),
                },
            ) from None
        except _ClientGone:
            entry["disconnected"] = "queued"
            return Response(status_code=499)
        entry["queue_ms"] = round((time.perf_counter() - waited) * 1000, 1)
        cancel = threading.Event()
        streamer = ContentStreamer() if prepared.stream else None
        if streamer is not None and _call_required(prepared.tool_choice):
            streamer.live = False  # the reply will be calls: no text of it is streamed
        events: asyncio.Queue = asyncio.Queue()

        def post(event: tuple[str, Any]) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        conversation = request.headers.get("x-lokal-conversation") or parsed.user or "serve"

        def work() -> Decision:
            started = time.perf_counter()
            try:
                decision = _decide(chosen, prepared, engine, cancel, streamer, post, server_tools)
                _give_call_ids(decision)  # before it is recorded: the ids the client gets
                if conversations is not None:
                    _record(conversations, conversation, prepared, decision, chosen)
                if streamer is not None:
                    post(("done", decision))
                return decision
            except BaseException as exc:
                if streamer is not None:
                    post(("error", exc))
                raise
            finally:
                loop.call_soon_threadsafe(slots.release, time.perf_counter() - started)

        future = loop.run_in_executor(executor, work)
        if streamer is not None:
            return EventSourceResponse(
                _stream(parsed, chosen, prepared, streamer, events, cancel, entry),
                ping=15,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        while True:
            done, _ = await asyncio.wait({future}, timeout=_POLL_SECONDS)
            if done:
                break
            if await request.is_disconnected():
                cancel.set()
                entry["disconnected"] = "generating"
                future.add_done_callback(lambda f: f.exception())  # read, never raised
                return Response(status_code=499)
        try:
            decision = future.result()
        except LokalError as exc:  # a caller's mistake the decision engine found
            raise wire.APIError(str(exc)) from None
        entry.update(_decision_log(decision))
        reason = wire.finish_reason(decision)
        if not decision.ok and reason != "length":
            raise _no_reply(decision, chosen)
        calls = wire.openai_tool_calls(decision) if decision.ok else []
        return JSONResponse(wire.completion_response(decision, chosen, calls, wire.completion_id()))

    if body_timeout:
        app.add_middleware(_BodyTimeout, seconds=body_timeout)
    app.add_middleware(_LogRequests, log=logger)
    return app


_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
            "required": ["message", "type", "param", "code"],
        }
    },
    "required": ["error"],
}
_ERRORS = {
    "400": "a bad request, `param` naming the field",
    "401": "missing or wrong API key",
    "404": "model_not_found",
    "408": "the body did not arrive within --body-timeout",
    "429": "queue_full, with Retry-After",
    "500": "no_valid_reply, model_not_loadable, or an unexpected error",
}


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI schema (not served: no /openapi.json, no /docs) with what FastAPI
    cannot see, since the handler checks the body itself: the chat completions request
    (``wire.ChatRequest``) and OpenAI's error shape. The fuzz tests are generated from it."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        from lokal import __version__

        schema = get_openapi(title=app.title, version=__version__, routes=app.routes)
        body = wire.ChatRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas.update(body.pop("$defs", {}), ChatRequest=body, Error=_ERROR_SCHEMA)
        operation = schema["paths"]["/v1/chat/completions"]["post"]
        request = {"$ref": "#/components/schemas/ChatRequest"}
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": request}},
        }
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        operation["responses"].update(
            {code: {"description": what, "content": error} for code, what in _ERRORS.items()}
        )
        app.openapi_schema = schema
    return app.openapi_schema


def _model_not_found(name: str, names: list[str], unavailable: dict[str, str]) -> wire.APIError:
    """404 ``model_not_found`` in OpenAI's shape (the SDKs do not retry a 404): a profile
    that is not served here, or one that cannot load on this machine (and why)."""
    available = ", ".join(names) or "none"
    if name in unavailable:
        message = (
            f"model {name!r} cannot be loaded here: {unavailable[name]}; available: {available}"
        )
    else:
        message = f"model {name!r} is not served here; available: {available}"
    return wire.APIError(
        message,
        status=404,
        param="model",
        code="model_not_found",
        headers={"x-should-retry": "false"},
    )


def _ranks_tools(profile: Profile, backend: Backend | None) -> bool:
    """Whether the decisions of ``profile`` rank the tools on offer with the embedding model
    (``lokal.llm.request._preselect``): it preselects (``preselect_k``), or decides in stages
    on a backend that scores (of the shipped ones, llama.cpp's; a given one is asked)."""
    settings = profile.tool_calling
    if settings.preselect_k is not None:
        return True
    if settings.mode != "staged":
        return False
    if backend is not None:
        from lokal.llm.staged import can_score

        return can_score(backend)
    return profile.backend == "llamacpp"


def _load_at_start(
    profiles: list[Profile], backend: Backend | None, log: Callable[[dict[str, Any]], None]
) -> None:
    """Load the embedding model of tool preselection when a served profile ranks tools,
    so that no request waits for it; one log line (``event: model_load``) says so."""
    users = [p.name for p in profiles if _ranks_tools(p, backend)]
    if not users:
        return
    from lokal.llm.select import default_selector
    from lokal.rag.embeddings import MINILM

    started = time.perf_counter()
    selector = default_selector()
    dense = selector.load()
    if dense is None:  # loaded already in this process, or off
        return
    entry: dict[str, Any] = {
        "ts": round(time.time(), 3),
        "event": "model_load",
        "component": "embeddings",
        "model": MINILM,
        "duration_s": round(time.perf_counter() - started, 4),
        "dense": dense,
        "profiles": users,
    }
    if not dense:
        entry["error"] = selector._dense_error
    log(entry)


def _unavailable(profile: Profile) -> str | None:
    """Why ``profile`` cannot load on this machine, found without loading it; None when it
    may (a remote server, the mock, a backend lokal cannot check, a model file that is
    there)."""
    from importlib.util import find_spec

    from lokal.models import resolve_model_path

    settings = profile.model
    try:
        if profile.backend == "llamacpp":
            packages = ["llama_cpp"]
            path = resolve_model_path(settings.model_path)
        elif profile.backend == "transformers":
            packages = ["torch", "transformers"]
            path = resolve_model_path(settings.model_name_or_path, what="model_name_or_path")
        else:
            return None
    except LokalError as exc:
        return str(exc)
    missing = [name for name in packages if find_spec(name) is None]
    if missing:
        return f"the {profile.backend} backend needs {', '.join(missing)}, not installed"
    if not Path(path).exists():
        what = "file" if profile.backend == "llamacpp" else "directory"
        return f"model {what} {path!r} not found"
    return None


def _no_reply(decision: Decision, profile: Profile) -> wire.APIError:
    error = decision.error.message if decision.error else "no reply"
    exc = wire.APIError(
        f"the model gave no usable reply after {len(decision.attempts)} attempt(s): {error}",
        status=500,
        type="server_error",
        code="no_valid_reply",
        headers={"x-should-retry": "false"},
    )
    return exc


def _call_required(choice: Any) -> bool:
    if choice == "required":
        return True
    if isinstance(choice, dict):
        if choice.get("type") == "function":
            return True
        return (choice.get("allowed_tools") or {}).get("mode") == "required"
    return False


def _decision_log(decision: Decision) -> dict[str, Any]:
    return {
        "lokal_status": decision.status,
        "attempts": len(decision.attempts),
        "tool_calls": len(decision.tool_calls) if decision.ok else 0,
        "prompt_tokens": decision.usage.prompt_tokens,
        "completion_tokens": decision.usage.completion_tokens,
        "decision_ms": decision.latency_ms,
    }


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise wire.APIError(
            f"the request body of {declared} bytes is larger than the limit of {limit} bytes "
            "(lokal serve --max-body-bytes)",
            code="body_too_large",
        )
    chunks, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise wire.APIError(
                f"the request body is larger than the limit of {limit} bytes "
                "(lokal serve --max-body-bytes)",
                code="body_too_large",
            )
        chunks.append(part)
    return b"".join(chunks)


async def _acquire(request: Request, slots: Slots) -> None:
    """A slot; QueueFull, or _ClientGone when the client left while waiting."""
    waiting = asyncio.ensure_future(slots.acquire())
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=_POLL_SECONDS)
        if done:
            waiting.result()
            return
        if await request.is_disconnected():
            waiting.cancel()
            try:
                await waiting
            except asyncio.CancelledError:
                raise _ClientGone() from None
            slots.release()  # it got the slot just before the cancel
            raise _ClientGone()


def _give_call_ids(decision: Decision) -> None:
    """Give the reply's calls the ids the client gets (``call_`` and 24 hex digits, unique
    across conversations, where the decision numbers them ``call_001``…)."""
    message = decision.ai_message
    if message and message.get("tool_calls"):
        calls = [{**call, "id": wire.new_call_id()} for call in message["tool_calls"]]
        decision.ai_message = {**message, "tool_calls": calls}


def _record(
    store: ConversationStore,
    conversation: str,
    prepared: wire.Prepared,
    decision: Decision,
    profile: Profile,
) -> None:
    """One request as one run of ``conversation``: the request's messages the conversation
    does not hold yet (the question; the results of the calls the client was given, which
    it sends back with the whole conversation), then the reply, its calls under the ids the
    client got; so that ``lokal run --conversation`` continues it as it happened."""
    question = last_user_text(prepared.messages)
    new = store.unstored(conversation, prepared.messages)
    run_id = store.start_run(conversation, question, profile.name)
    for message in new:
        store.append(run_id, message)
    if decision.ai_message is not None:
        store.append(
            run_id,
            decision.ai_message,
            latency_ms=decision.latency_ms,
            usage=decision.usage.to_dict(),
        )
    store.finish_run(
        run_id,
        status="final" if decision.ok else "decision_error",
        answer=(decision.ai_message or {}).get("content") or "",
        stop_reason="served" if decision.ok else (decision.error.message if decision.error else ""),
        prompt_tokens=decision.usage.prompt_tokens,
        completion_tokens=decision.usage.completion_tokens,
        duration_s=round(decision.latency_ms / 1000, 4),
    )


def _decide(
    profile: Profile,
    prepared: wire.Prepared,
    engine: _Reporting,
    cancel: threading.Event,
    streamer: ContentStreamer | None,
    post: Callable[[tuple[str, Any]], None],
    server_tools: ToolRegistry | None = None,
) -> Decision:

    if prepared.generation:
        generation = profile.generation.model_validate(
            {**profile.generation.model_dump(), **prepared.generation}
        )
        profile = profile.replace(generation=generation)

    def listener(fields: dict[str, Any]) -> None:
        if cancel.is_set():
            raise _Cancelled()
        if streamer is None:
            return
        if "streamable" in fields:
            streamer.start(bool(fields["streamable"]))
        text = fields.get("text")
        if text:
            delta = streamer.feed(text)
            if delta:
                post(("content", delta))

    with listening(listener):
        return _decide_with_server_tools(profile, prepared, engine, server_tools)


def _decide_with_server_tools(
    profile: Profile, prepared: wire.Prepared, engine: Backend, server_tools: ToolRegistry | None
) -> Decision:
    """One decision for the client; calls of the server's own tools (``--mcp``) are run here
    and the model decides again, at most ``SERVER_TOOL_ROUNDS`` times."""
    from lokal.llm.decide import generate_ai_message

    client_names = {spec.name for spec in tool_specs(prepared.tools)}
    own = [t for t in server_tools or () if t.name not in client_names]
    own_names = {t.name for t in own}
    messages = list(prepared.messages)
    runs: list[dict[str, Any]] = []
    spent = Usage()
    for round_number in range(SERVER_TOOL_ROUNDS + 1):
        last = round_number == SERVER_TOOL_ROUNDS
        decision = generate_ai_message(
            profile,
            messages,
            [*prepared.tools, *own],
            strategy="react",
            backend=engine,
            # after the last round of server tools the model answers with the client's tools
            tool_choice=prepared.tool_choice if not last or not own else "none",
            parallel_tool_calls=prepared.parallel_tool_calls,
            response_format=prepared.response_format,
        )
        theirs = [c for c in decision.tool_calls if c["name"] in own_names]
        if not decision.ok or not theirs or server_tools is None:
            break
        calls = [
            {**call, "id": f"call_srv{round_number + 1}_{i + 1}"} for i, call in enumerate(theirs)
        ]
        results = server_tools.execute_many(calls)
        runs += [
            {"name": c["name"], "args": c["args"], "status": r["status"]}
            for c, r in zip(calls, results, strict=True)
        ]
        rest = [c for c in decision.tool_calls if c["name"] not in own_names]
        if rest:  # the client's calls wait for the client; the server's ran already
            decision.ai_message = make_ai_message("", rest)
            break
        spent.add(decision.usage)  # an inner step: its tokens count towards the reply's
        messages += [make_ai_message("", calls), *results]
    decision.usage.add(spent)
    if runs:
        decision.parse = {**decision.parse, "server_tools": runs}
    return decision


async def _stream(
    parsed: wire.ChatRequest,
    profile: Profile,
    prepared: wire.Prepared,
    streamer: ContentStreamer,
    events: asyncio.Queue,
    cancel: threading.Event,
    entry: dict[str, Any],
) -> Any:
    """The server-sent events of one streamed reply."""
    ident = wire.completion_id()
    usage = prepared.include_usage

    def event(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any):
        return {
            "data": sse_data(
                chunk(ident, profile.name, delta, finish, include_usage=usage, extra=extra)
            )
        }

    finished = False
    try:
        yield event({"role": "assistant", "content": None})
        while True:
            kind, value = await events.get()
            if kind == "content":
                yield event({"content": value})
                continue
            if kind == "error":
                message = str(value) if isinstance(value, LokalError) else type(value).__name__
                entry["error"] = message
                yield {"data": sse_data(wire.error_body(message, "server_error"))}
                break
            decision: Decision = value
            entry.update(_decision_log(decision))
            reason = wire.finish_reason(decision)
            info = wire.lokal_info(decision, profile)
            if decision.ok and decision.tool_calls:
                for delta in tool_call_chunks(wire.openai_tool_calls(decision)):
                    yield event(delta)
            elif decision.ok or reason == "length":
                content = (
                    (decision.ai_message or {}).get("content", "")
                    if decision.ok
                    else (wire.unusable_text(decision))
                )
                rest, replaced = streamer.finish(content)
                if rest:
                    yield event({"content": rest})
                if replaced:
                    info.update(content_replaced=True, content=content)
            else:
                error = _no_reply(decision, profile)
                body = error.body()
                body["lokal"] = info
                yield {"data": sse_data(body)}
                break
            yield event({}, reason, lokal=info)
            if usage:
                final = chunk(ident, profile.name, include_usage=True)
                final["choices"] = []
                final["usage"] = wire.usage(decision)
                yield {"data": sse_data(final)}
            break
        finished = True
        yield {"data": "[DONE]"}
    finally:
        if not finished:
            cancel.set()  # the client went away: stop the generation at its next token
            entry["disconnected"] = "streaming"
