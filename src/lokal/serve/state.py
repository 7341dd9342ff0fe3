"""What every route of one ``lokal serve`` shares: the profiles it serves, their engines and
queues, the key check, the request log and the worker threads (``ServeState``).

A request names its profile in ``model``; ``ServeState.profile`` loads it (a 404 the SDKs do
not retry when it is not served or cannot load here), ``ServeState.engine`` its backend (once,
in a worker thread), and the engine's ``Slots`` are the one queue every API of the server
shares: requests for a model loaded in this process take turns, a profile on a remote server
runs up to ``remote_concurrency`` at once.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request

from lokal.config import Profile, load_profile, read_config
from lokal.errors import ConfigError, LokalError
from lokal.llm.backends import Backend, GenerationRequest, get_backend
from lokal.memory.conversations import ConversationStore
from lokal.memory.responses import ResponseStore
from lokal.progress import report
from lokal.serve import wire
from lokal.serve.slots import Slots
from lokal.tools.registry import ToolRegistry

__all__ = ["Limits", "Reporting", "ServeState", "config_path", "served_names"]

REMOTE_BACKENDS = frozenset({"openai"})


class Reporting:
    """A backend that tells the progress listener when a generation writing a whole reply
    starts (``streamable``; not the argument steps of a staged decision, which continue a
    prefix), so that the stream knows where a reply's text begins."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def generate(self, request: GenerationRequest) -> Any:
        report(phase="reply", streamable=not request.prefix)
        return self._inner.generate(request)


@dataclass(frozen=True)
class Limits:
    """The server's limits on a request (``lokal serve``'s options)."""

    max_queue: int = 8
    max_body_bytes: int = 4 * 1024 * 1024
    body_timeout: float | None = 30.0  # seconds for a request's whole body to arrive
    remote_concurrency: int = 16


def config_path(config: str | Path | None) -> Path:
    from lokal.config import default_config_path

    return Path(config) if config is not None else default_config_path()


def served_names(
    config: str | Path | dict | Profile | None, default: str | None = None
) -> list[str]:
    """The profiles served, the default first."""
    if isinstance(config, Profile):
        return [config.name]
    data = config if isinstance(config, dict) else read_config(config_path(config))
    base = (data.get("model") or {}).get("name") or "default"
    names = [default or base]
    for name in [base, *(data.get("models") or {})]:
        if name not in names:
            names.append(name)
    return names


class ServeState:
    """The shared state of one server (see the module's docstring); ``create_app`` makes it
    and every route reads it from ``request.app.state.lokal``."""

    def __init__(
        self,
        config: str | Path | dict | Profile | None,
        *,
        profile: str | None,
        backend: Backend | None,
        backend_name: str | None,
        tool_calling: str | None,
        api_key: str | None,
        limits: Limits,
        log: Callable[[dict[str, Any]], None],
        server_tools: ToolRegistry | None,
        conversations: ConversationStore | None,
        prompt_cache_mb: int | None,
        traces_dir: Path | None = None,
        keep_traces: bool = True,
    ) -> None:
        source = config if isinstance(config, dict | Profile) else config_path(config)
        self.names = served_names(source, profile)
        if isinstance(source, Profile) and tool_calling:
            source = source.with_tool_calling(mode=tool_calling)
        self.source = source
        self.base_name = self.names[0] if isinstance(source, Profile) else served_names(source)[0]
        self.backend = backend
        self.backend_name = backend_name
        self.tool_calling = tool_calling
        self.api_key = api_key
        self.limits = limits
        self.log = log
        self.server_tools = server_tools
        self.conversations = conversations
        self.prompt_cache_mb = prompt_cache_mb
        self._responses: ResponseStore | None = None
        self.traces_dir = traces_dir  # None: $LOKAL_HOME/traces
        self.keep_traces = keep_traces
        self.profiles: dict[str, Profile] = {}
        self.engines: dict[int, tuple[Reporting, Slots]] = {}
        self.resolved: dict[str, tuple[Reporting, Slots]] = {}  # a profile's, once loaded
        self.executor = ThreadPoolExecutor(
            max_workers=limits.remote_concurrency + 4, thread_name_prefix="lokal"
        )
        # profiles that cannot load here (a model folder or file that is not there, a
        # backend's package not installed) are not listed, and a request for one is a 404 the
        # SDKs do not retry; found cheaply now, without loading any model
        self.unavailable: dict[str, str] = {}
        if backend is None:
            for name in list(self.names):
                try:
                    reason = unavailable_reason(self.load(name))
                except LokalError as exc:
                    reason = str(exc)
                if reason is not None:
                    self.unavailable[name] = reason
            self.names = [name for name in self.names if name not in self.unavailable]

    # -- profiles and engines -----------------------------------------------------------

    def load(self, name: str) -> Profile:
        """The profile ``name``, loaded once (ConfigError when the config has no such one)."""
        if name not in self.profiles:
            source = self.source
            if isinstance(source, Profile):
                loaded = source
            else:
                data = source if isinstance(source, dict) else read_config(source)
                listed = name in (data.get("models") or {})
                loaded = load_profile(
                    source, name if listed else None, tool_calling=self.tool_calling
                )
                if not listed and name != self.base_name:
                    raise ConfigError(f"unknown profile {name!r}")
            if self.backend_name:
                loaded = loaded.with_backend(self.backend_name)
            if self.prompt_cache_mb is not None:
                update = {"prompt_cache_mb": self.prompt_cache_mb}
                loaded = loaded.replace(model=loaded.model.model_copy(update=update))
            self.profiles[name] = loaded
        return self.profiles[name]

    def profile(self, model: str) -> Profile:
        """The profile a request names, or the APIError its client gets."""
        if model not in self.names:
            raise model_not_found(model, self.names, self.unavailable)
        try:
            return self.load(model)
        except LokalError as exc:
            raise wire.APIError(f"model {model!r}: {exc}", param="model") from None

    def engine_for(self, chosen: Profile) -> tuple[Reporting, Slots]:
        """The backend of ``chosen`` and its queue (loading it: blocks)."""
        inner = self.backend if self.backend is not None else get_backend(chosen)
        key = id(inner)
        if key not in self.engines:
            remote = self.backend is None and chosen.backend in REMOTE_BACKENDS
            slots = Slots(self.limits.remote_concurrency if remote else 1, self.limits.max_queue)
            self.engines[key] = (Reporting(inner), slots)
        self.resolved[chosen.name] = self.engines[key]
        return self.engines[key]

    async def engine(self, chosen: Profile, model: str) -> tuple[Reporting, Slots]:
        """``engine_for`` without blocking the event loop: loading a model runs in a worker
        thread, once; a model found unloadable then is a 500 not retried, and not listed."""
        known = self.resolved.get(chosen.name)
        if known is not None:
            return known
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.executor, self.engine_for, chosen)
        except LokalError as exc:
            self.unavailable[model] = str(exc)
            if model in self.names:
                self.names.remove(model)
            message = f"model {model!r} cannot be loaded: {exc}"
            raise wire.APIError.server(message, "model_not_loadable") from None

    def response_store(self) -> ResponseStore:
        """The stored responses of the Responses API, in ``lokal.db``: the conversation
        store's file when the server records conversations, else the lokal home's."""
        if self._responses is None:
            path = None
            if self.conversations is not None:
                path = self.conversations.conn.execute("PRAGMA database_list").fetchone()[2]
            self._responses = ResponseStore(path or None)
        return self._responses

    def queues(self) -> list[dict[str, Any]]:
        return [slots.state() for _, slots in self.engines.values()]

    # -- the key ------------------------------------------------------------------------

    def authorize(self, request: Request) -> None:
        """401 unless the request carries the key: ``Authorization: Bearer <key>`` (OpenAI's
        clients) or ``x-api-key: <key>`` (Anthropic's)."""
        if not self.api_key:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            token = request.headers.get("x-api-key", "")
        if not token or not hmac.compare_digest(token.strip().encode(), self.api_key.encode()):
            raise wire.APIError(
                "missing or wrong API key: send the header 'Authorization: Bearer <key>' "
                "(or 'x-api-key: <key>')",
                status=401,
                code="invalid_api_key",
            )

    # -- at start -----------------------------------------------------------------------

    def load_at_start(self) -> None:
        """Load the embedding model of tool preselection when a served profile ranks tools,
        so that no request waits for it; one log line (``event: model_load``) says so."""
        served = []
        for name in self.names:
            try:
                served.append(self.load(name))
            except LokalError:  # a request for it says why
                continue
        users = [p.name for p in served if ranks_tools(p, self.backend)]
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
            entry["error"] = selector.dense_error
        self.log(entry)


def model_not_found(name: str, names: list[str], unavailable: dict[str, str]) -> wire.APIError:
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


def ranks_tools(profile: Profile, backend: Backend | None) -> bool:
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


def unavailable_reason(profile: Profile) -> str | None:
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
