"""Live progress of slow model work, from the backend that does it to whoever watches.

A backend calls ``report(tokens=1)`` for each token it generates (``phase=...`` when it
starts something slow without tokens, such as scoring). The caller that wants to show it
(``lokal run``'s spinner) wraps the work in ``listening(callback)``. The listener lives in a
ContextVar: a decision reports to the run that asked for it, and code that nobody watches
pays one lookup per token.

    with listening(lambda fields: print(fields)):
        backend.generate(request)   # {'tokens': 1} per token
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["Listener", "listening", "report"]

Listener = Callable[[dict[str, Any]], None]

_LISTENER: ContextVar[Listener | None] = ContextVar("lokal_progress", default=None)


def report(**fields: Any) -> None:
    """Tell the current listener, if any, about progress (``tokens=1``, ``phase="scoring"``)."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(fields)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the progress reported inside this block (in this context) to ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
