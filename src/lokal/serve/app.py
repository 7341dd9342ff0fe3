"""The ASGI app of ``lokal serve``: OpenAI's chat completions on lokal's decision engine.

``create_app(config)`` serves every profile of a model.yaml (or one ``Profile``): it makes
the server's shared state (``lokal.serve.state.ServeState``: profiles, engines, the queue,
the key check), mounts the routes of each API (``lokal.serve.routes``) and the trace viewer
(``/traces``), and adds the request log and the body deadline (``lokal.serve.middleware``).
Every reply, whichever API asked for it, is a turn of the runtime's agent loop
(``lokal.serve.turn``).

Concurrency: requests for a model loaded in this process take turns (one generation at a
time) in a bounded queue (``max_queue``; beyond it, 429 with ``Retry-After``); a profile on a
remote server (backend ``openai``: vLLM, Ollama, llama.cpp's server) runs up to
``remote_concurrency`` requests at once. A client that goes away frees its place in the
queue at once, and a generation under way stops at its next token.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lokal.config import Profile
from lokal.llm.backends import Backend
from lokal.memory.conversations import ConversationStore
from lokal.serve import anthropic, responses, wire
from lokal.serve.middleware import BodyTimeout, JsonLog, LogRequests
from lokal.serve.routes import chat, embeddings, messages, models
from lokal.serve.routes import responses as responses_routes
from lokal.serve.state import Limits, ServeState, served_names
from lokal.serve.turn import SERVER_TOOL_ROUNDS
from lokal.tools.registry import ToolRegistry
from lokal.viewer.routes import traces_router

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_QUEUE",
    "SERVER_TOOL_ROUNDS",
    "JsonLog",
    "create_app",
    "served_names",
]

DEFAULT_MAX_QUEUE = Limits.max_queue
DEFAULT_MAX_BODY_BYTES = Limits.max_body_bytes
DEFAULT_BODY_TIMEOUT = Limits.body_timeout  # seconds for a request's whole body to arrive


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
    keep_traces: bool = True,
) -> FastAPI:
    """The app serving ``config`` (a model.yaml path or mapping, or one Profile).

    ``profile`` is the default profile (listed first); ``backend`` replaces every profile's
    backend with an instance (tests: a ScriptedBackend); ``backend_name`` and
    ``tool_calling`` override every profile's. ``api_key``: requests without ``Authorization:
    Bearer <key>`` (or ``x-api-key: <key>``) get 401. ``body_timeout``: seconds for a
    request's body to arrive after its headers, else 408 and the connection closed (None: no
    limit). ``log``: a callable taking each request's entry, or a file path (default: one
    JSON line per request on stderr). ``server_tools``: tools the server runs itself
    (``lokal serve --mcp``): offered to the model beside the request's tools; a reply that
    calls them is answered by running them and deciding again, under the agent loop's guards,
    and the client sees only its own tools' calls or the answer (the server's runs are listed
    in ``lokal.server_tools``). ``traces_dir``: the runs shown at ``/traces`` (default
    ``$LOKAL_HOME/traces``), where every request's turn is kept as a trace unless
    ``keep_traces`` is False. ``conversations``: record each request (its last user message,
    the reply, tokens and latency) as a run of the conversation the request names (the
    ``X-Lokal-Conversation`` header, else the request's ``user`` field, else ``serve``).
    ``prompt_cache_mb``: RAM for saved llama.cpp prompt states, so that the conversations of
    different clients each resume from their own prefix (overrides the profiles'
    ``model.prompt_cache_mb``).
    """
    state = ServeState(
        config,
        profile=profile,
        backend=backend,
        backend_name=backend_name,
        tool_calling=tool_calling,
        api_key=api_key,
        limits=Limits(max_queue, max_body_bytes, body_timeout, remote_concurrency),
        log=log if callable(log) else JsonLog(log),
        server_tools=server_tools,
        conversations=conversations,
        prompt_cache_mb=prompt_cache_mb,
        traces_dir=Path(traces_dir).expanduser() if traces_dir is not None else None,
        keep_traces=keep_traces,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        # what every request of a profile uses is loaded before the first one comes
        await asyncio.to_thread(state.load_at_start)
        yield

    app = FastAPI(
        title="lokal serve", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.state.lokal = state
    app.state.names = state.names  # the same list: kept up to date as models are found out
    app.state.unavailable = state.unavailable
    app.state.engines = state.engines
    for handler_of, handler in _ERROR_HANDLERS.items():
        app.add_exception_handler(handler_of, handler)
    app.include_router(models.router)
    app.include_router(chat.router)
    app.include_router(messages.router)
    app.include_router(responses_routes.router)
    app.include_router(embeddings.router)
    app.include_router(traces_router(traces_dir, api_key=api_key))  # /traces: docs/tracing.md
    if body_timeout:
        app.add_middleware(BodyTimeout, seconds=body_timeout)
    app.add_middleware(LogRequests, log=state.log)
    return app


def _anthropic(request: Request) -> bool:
    """Whether the request is one of Anthropic's API (its errors take Anthropic's shape)."""
    return request.url.path.startswith("/v1/messages")


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, wire.APIError)
    entry = request.scope.get("lokal_log")
    if entry is not None:
        entry["error"] = exc.message if exc.status != 401 else "unauthorized"
    body = anthropic.error_body(exc) if _anthropic(request) else exc.body()
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    body = wire.error_body(str(exc.detail), "invalid_request_error")
    if _anthropic(request):
        body = anthropic.error_body(wire.APIError(str(exc.detail), status=exc.status_code))
    return JSONResponse(body, status_code=exc.status_code)


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    entry = request.scope.get("lokal_log")
    if entry is not None:
        entry["error"] = f"{type(exc).__name__}: {exc}"
    body = wire.error_body(f"internal error: {type(exc).__name__}", "server_error")
    if _anthropic(request):
        body = anthropic.error_body(
            wire.APIError(f"internal error: {type(exc).__name__}", status=500)
        )
    # Starlette raises the exception again after this reply, and uvicorn then closes the
    # connection: the client is told so, rather than finding it closed under its next request
    return JSONResponse(body, status_code=500, headers={"Connection": "close"})


_ERROR_HANDLERS = {
    wire.APIError: _api_error,
    StarletteHTTPException: _http_error,
    Exception: _server_error,
}


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI schema (not served: no /openapi.json, no /docs) with what FastAPI
    cannot see, since the handlers check the bodies themselves: each API's request model
    (``_BODIES``) and its error shape. The fuzz tests are generated from it."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        from lokal import __version__

        schema = get_openapi(title=app.title, version=__version__, routes=app.routes)
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas.update(Error=_ERROR_SCHEMA, AnthropicError=_ANTHROPIC_ERROR_SCHEMA)
        for path, (name, model, error_name) in _BODIES.items():
            body = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(body.pop("$defs", {}), **{name: body})
            operation = schema["paths"][path]["post"]
            request = {"$ref": f"#/components/schemas/{name}"}
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": request}},
            }
            error = {"application/json": {"schema": {"$ref": f"#/components/schemas/{error_name}"}}}
            operation["responses"].update(
                {code: {"description": what, "content": error} for code, what in _ERRORS.items()}
            )
        app.openapi_schema = schema
    return app.openapi_schema


_BODIES = {  # path: (schema name, request model, error schema name)
    "/v1/chat/completions": ("ChatRequest", wire.ChatRequest, "Error"),
    "/v1/responses": ("ResponsesRequest", responses.ResponsesRequest, "Error"),
    "/v1/embeddings": ("EmbeddingsRequest", embeddings.EmbeddingsRequest, "Error"),
    "/v1/messages": ("MessagesRequest", anthropic.MessagesRequest, "AnthropicError"),
    "/v1/messages/count_tokens": ("CountRequest", anthropic.CountRequest, "AnthropicError"),
}
_ANTHROPIC_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            "required": ["type", "message"],
        },
    },
    "required": ["type", "error"],
}
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
    "500": "no_valid_reply, time_budget, model_not_loadable, or an unexpected error",
}
