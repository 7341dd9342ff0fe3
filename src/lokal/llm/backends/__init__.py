"""Backends: prompt messages + generation settings (+ optional reply schema) → text and tokens.

Every backend, built-in or outside, is a factory registered by name: ``register_backend``.
Loaded backends are cached by the settings that change what is loaded (``load_key``), so
switching between profiles that differ only in sampling reuses the loaded model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Protocol, runtime_checkable

from lokal.config import GenerationSettings, Profile
from lokal.errors import ConfigError

__all__ = [
    "Backend",
    "Completion",
    "GenerationRequest",
    "check_backend",
    "clear_backend_cache",
    "get_backend",
    "register_backend",
]


@dataclass
class GenerationRequest:
    """One call to a backend.

    ``messages`` are the prompt messages (system prompt included). ``tools`` (OpenAI form) are
    the tools on offer; ``pass_tools`` says to hand them to the chat template or the server
    (builtin/native mode) rather than relying on the prompt. ``response_schema`` is the
    JSON Schema the reply must match (constrained mode). ``purpose`` says which step asked:
    ``decide``, ``plan``, ``step`` or ``final``. ``conversation`` is the caller's messages
    before any prompt decoration (the mock backend reads those two). ``prefix`` is the start
    of the reply, already chosen: the model continues after it (staged decisions; backends
    with the ``score`` capability). ``response_suffix`` is literal text the reply must end with
    after the value of ``response_schema`` (the closing of an envelope whose start is in
    ``prefix``). ``deadline`` is a ``time.perf_counter()`` value: a backend that can stop
    its evaluation (llama.cpp) raises ``BackendDeadline`` once it passes; the others ignore it.
    """

    messages: list[dict[str, Any]]
    settings: GenerationSettings
    tools: list[dict[str, Any]] | None = None
    pass_tools: bool = False
    response_schema: dict[str, Any] | None = None
    purpose: str = "decide"
    conversation: list[dict[str, Any]] = field(default_factory=list)
    prefix: str = ""
    response_suffix: str = ""
    deadline: float | None = None


@dataclass
class Completion:
    """What a backend produced: the raw text, token counts, and native calls if any."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    native_tool_calls: list[dict[str, Any]] | None = None
    details: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """A loaded model. ``capabilities`` lists the tool_calling modes it can do."""

    name: str
    capabilities: frozenset[str]

    def generate(self, request: GenerationRequest) -> Completion: ...


BackendFactory = Callable[[Profile], Backend]


@dataclass(frozen=True)
class _Registration:
    factory: BackendFactory | str  # a callable, or "module:attribute" imported on first use
    load_key: Callable[[Profile], Hashable]


_REGISTRY: dict[str, _Registration] = {}
_CACHE: dict[tuple[str, Hashable], Backend] = {}
_CACHE_LOCK = threading.Lock()


def _no_load_key(profile: Profile) -> Hashable:
    return ()


def register_backend(
    name: str,
    factory: BackendFactory | str,
    load_key: Callable[[Profile], Hashable] = _no_load_key,
) -> None:
    """Register a backend factory under ``name`` (a callable or a ``"module:attr"`` path)."""
    _REGISTRY[name] = _Registration(factory, load_key)


def _resolve(factory: BackendFactory | str) -> BackendFactory:
    if callable(factory):
        return factory
    module_name, _, attribute = factory.partition(":")
    return getattr(import_module(module_name), attribute)


def check_backend(profile: Profile) -> _Registration:
    """The registration of ``profile``'s backend, without loading it; a ConfigError naming
    the available backends when there is none of that name."""
    registration = _REGISTRY.get(profile.backend)
    if registration is None:
        raise ConfigError(
            f"unknown backend {profile.backend!r} in profile {profile.name!r}; "
            f"available: {', '.join(sorted(_REGISTRY))}"
        )
    return registration


def get_backend(profile: Profile) -> Backend:
    """The loaded backend for ``profile``, from the cache when nothing that is loaded changed."""
    name = profile.backend
    registration = check_backend(profile)
    key = (name, registration.load_key(profile))
    with _CACHE_LOCK:
        backend = _CACHE.get(key)
        if backend is None:
            backend = _resolve(registration.factory)(profile)
            _CACHE[key] = backend
    return backend


def clear_backend_cache() -> None:
    """Forget every loaded backend (tests, or to free memory)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def check_mode_supported(backend: Backend, mode: str, profile_name: str) -> None:
    """A clear ConfigError when ``backend`` cannot pass tools the way ``mode`` asks.

    Every shipped backend (llamacpp, transformers, openai, mock, and the tests' scripted one)
    can do prompt_json, builtin and constrained, and a staged profile on a backend that cannot
    score falls back to constrained, so none of them fails this check. It is here for
    backends registered from outside with ``register_backend``, whose ``capabilities`` may
    list fewer modes."""
    if mode not in backend.capabilities:
        raise ConfigError(
            f"profile {profile_name!r}: backend {backend.name!r} cannot do tool_calling "
            f"{mode!r}; it supports {', '.join(sorted(backend.capabilities))}"
        )


def _model_load_key(profile: Profile) -> Hashable:
    m = profile.model
    return (
        m.model_path,
        m.model_name_or_path,
        m.tokenizer_path,
        m.gguf_file,
        m.torch_dtype,
        m.device_map,
        m.n_ctx,
        m.n_threads,
        m.n_batch,
        m.chat_format,
        m.grammar_engine,
        tuple(sorted((m.max_memory or {}).items())),
    )


def _server_load_key(profile: Profile) -> Hashable:
    m = profile.model
    return (m.base_url, m.model, m.api_key_env, m.timeout, m.http_retries, m.response_format)


register_backend("mock", "lokal.llm.backends.mock:MockBackend")
register_backend("llamacpp", "lokal.llm.backends.llamacpp:LlamaCppBackend", _model_load_key)
register_backend(
    "transformers", "lokal.llm.backends.transformers:TransformersBackend", _model_load_key
)
register_backend("openai", "lokal.llm.backends.openai_compat:OpenAICompatBackend", _server_load_key)
