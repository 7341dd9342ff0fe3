"""``lokal serve``: an OpenAI-compatible chat-completions server on lokal's decision engine
(``create_app``), whose tool calls are parsed, validated and retried before a client sees
them. Needs the ``serve`` extra (fastapi, uvicorn, sse-starlette)."""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def create_app(*args: Any, **kwargs: Any) -> Any:
    """See ``lokal.serve.app.create_app``."""
    from lokal.serve.app import create_app as create

    return create(*args, **kwargs)
