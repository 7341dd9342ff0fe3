"""The live status line of slow work: what runs, seconds so far, tokens generated so far.

``lokal run``, ``lokal decide`` and ``lokal rag ask`` show it on stderr while the model
loads and while it decides, so a decision that takes a minute on a busy machine is visibly
working. It draws only on a terminal (a pipe or a log file gets no spinner frames) and never
on stdout, so ``--json`` output stays clean. Tokens come from the backend through
``lokal.progress``: the spinner is the listener.

    with working("deciding", console=console):
        generate_ai_message(...)      # ⠋ deciding … 12.4 s, 37 tokens
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.text import Text

from lokal.progress import listening

__all__ = ["Spinner", "stderr_console", "working"]


def stderr_console() -> Console:
    """Rich on stderr. Into a pipe or a file (no terminal) lines are not wrapped at rich's
    default of 80 columns: each line stays whole, for logs and grep."""
    console = Console(stderr=True, highlight=False)
    if not console.is_terminal:
        console.soft_wrap = True
    return console


class Spinner:
    """One transient status line (rich), redrawn several times a second while active.

    Call it with progress fields (it is a ``lokal.progress`` listener): ``tokens=n`` adds to
    the count, ``phase=...`` names what the backend is doing.
    """

    def __init__(self, console: Console, *, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled and console.is_terminal
        self.label = ""
        self.phase = ""
        self.tokens = 0
        self.started = time.perf_counter()
        self._status: Any = None

    def __call__(self, fields: dict[str, Any]) -> None:
        self.tokens += int(fields.get("tokens") or 0)
        if fields.get("phase"):
            self.phase = str(fields["phase"])

    def line(self) -> str:
        """The status text now, e.g. ``step 2: deciding (generating) … 3.1 s, 18 tokens``."""
        elapsed = time.perf_counter() - self.started
        phase = f" ({self.phase})" if self.phase else ""
        tokens = f", {self.tokens} tokens" if self.tokens else ""
        return f"{self.label}{phase} … {elapsed:.1f} s{tokens}"

    def __rich__(self) -> Text:
        return Text(self.line(), style="dim")

    @property
    def active(self) -> bool:
        return self._status is not None

    def start(self, label: str) -> None:
        """Show ``label``; the clock and the token count start again."""
        self.label, self.phase, self.tokens = label, "", 0
        self.started = time.perf_counter()
        if self.enabled and self._status is None:
            self._status = self.console.status(self, spinner="dots")
            self._status.start()

    def stop(self) -> float:
        """Hide the line; the seconds since ``start``."""
        if self._status is not None:
            self._status.stop()
            self._status = None
        return time.perf_counter() - self.started

    @contextmanager
    def step(self, label: str) -> Iterator[Spinner]:
        self.start(label)
        try:
            yield self
        finally:
            self.stop()


@contextmanager
def working(
    label: str, *, quiet: bool = False, console: Console | None = None
) -> Iterator[Spinner]:
    """A spinner for ``label`` while the block runs, counting the tokens the backend reports
    inside it; nothing is drawn with ``quiet`` or off a terminal."""
    spinner = Spinner(console or stderr_console(), enabled=not quiet)
    with listening(spinner), spinner.step(label):
        yield spinner
