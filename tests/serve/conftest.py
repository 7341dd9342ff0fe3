"""Fixtures of the ``lokal serve`` tests: a real uvicorn server on loopback, in a thread,
driven by the official openai SDK; the model is a ScriptedBackend given to create_app."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from serve_support import Served

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.serve.app import create_app


@pytest.fixture
def profile():
    """The free-decoding profile: the scripted replies are read by the parser as written."""
    return load_profile(MODEL_CONFIG, "smollm2-135m-free").with_tool_calling(preselect_k=None)


@pytest.fixture
def serve(profile) -> Iterator[Callable[..., Served]]:
    """``serve(replies_or_backend, **create_app_kwargs)`` starts a server; all are stopped
    at the end of the test."""
    started: list[Served] = []

    def start(backend: Any = (), config: Any = None, **kwargs: Any) -> Served:
        if not hasattr(backend, "generate"):
            backend = ScriptedBackend(list(backend))
        log: list[dict[str, Any]] = []
        kwargs.setdefault("log", log.append)
        app = create_app(config if config is not None else profile, backend=backend, **kwargs)
        served = Served(app, log)
        served.backend = backend
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()
