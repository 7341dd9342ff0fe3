"""The stored traces: where ``lokal run`` writes each run's trace, what ``lokal traces list``
shows of them, and a reader that follows a trace still being written.

A stored trace is ``$LOKAL_HOME/traces/YYYYMMDD-HHMMSS-xxxxxx.jsonl``: the local time the run
started and six hex digits, so that names sort by time and two runs of one second differ. A
run written elsewhere (``lokal run --trace FILE``) is kept as a symbolic link of that name
to FILE (``link_trace``), so that it is listed too.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lokal.errors import LokalError
from lokal.paths import traces_dir
from lokal.trace import TraceError, TraceReader

__all__ = [
    "TRACE_NAME",
    "TraceFollower",
    "copy_trace_link",
    "link_trace",
    "list_traces",
    "load_events",
    "new_trace_path",
    "summarize",
    "trace_file",
]

# what a stored trace's name may be (the served routes accept no other)
TRACE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.jsonl$")


def new_trace_path(directory: Path | None = None, now: float | None = None) -> Path:
    """A fresh trace file name in ``directory`` (default ``$LOKAL_HOME/traces``)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return (directory or traces_dir()) / f"{stamp}-{secrets.token_hex(3)}.jsonl"


def link_trace(path: str | Path, directory: Path | None = None) -> Path | None:
    """Keep a trace written elsewhere (``lokal run --trace FILE``) in the stored runs: a
    symbolic link ``directory/NAME.jsonl`` (default ``$LOKAL_HOME/traces``) to the file, so
    that ``lokal traces list`` and ``/traces`` show it while the file stays where it was
    asked for. None when ``path`` is already in ``directory``; where links cannot be made
    (Windows without the privilege) the link is a copy, made by ``copy_trace_link``."""
    target = Path(path).expanduser().resolve()
    folder = directory or traces_dir()
    if target.parent == folder.expanduser().resolve() and TRACE_NAME.match(target.name):
        return None
    link = new_trace_path(folder)
    link.parent.mkdir(parents=True, exist_ok=True)
    try:
        link.symlink_to(target)
    except OSError:
        return link  # not made: copy_trace_link copies the file there once it is complete
    return link


def copy_trace_link(link: Path | None, path: str | Path) -> None:
    """After the run: where ``link_trace`` could make no link, a copy of the trace."""
    if link is None or link.is_symlink() or link.exists():
        return
    import contextlib
    import shutil

    with contextlib.suppress(OSError):  # the link is a convenience: the trace is written
        shutil.copyfile(Path(path).expanduser(), link)


def trace_file(name: str, directory: Path | None = None) -> Path | None:
    """The stored trace called ``name`` (a bare file name), or None: no such trace, or a name
    that is not a trace's (no folders, no ``..``). A stored trace may be a link to a trace
    written elsewhere (``link_trace``)."""
    if not TRACE_NAME.match(name):
        return None
    folder = (directory or traces_dir()).resolve()
    path = folder / name
    if path.parent != folder or not path.is_file():
        return None
    return path.resolve()


class TraceFollower:
    """Reads a trace as it grows: each ``poll()`` gives the complete lines written since the
    last one, expanded (full prompts), with their line numbers; a line still being written
    waits for its newline. ``skip`` lines are read but not given (a client that reconnects
    after line ``skip``). ``finished``: the run's ``final`` event has been read."""

    def __init__(self, path: str | Path, skip: int = 0) -> None:
        self.path = Path(path)
        self.skip = skip
        self.line = 0
        self._offset = 0
        self._partial = b""
        self._reader = TraceReader()
        self.finished = False

    def poll(self) -> list[tuple[int, dict[str, Any]]]:
        with self.path.open("rb") as file:
            file.seek(self._offset)
            data = file.read()
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" after a final newline, else a line in progress
        out = []
        for raw in lines:
            self.line += 1
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{self.path}:{self.line}: not a JSON line ({exc.msg})") from None
            if not isinstance(event, dict):
                raise TraceError(f"{self.path}:{self.line}: not a JSON object")
            event = self._reader.expand(event)
            self.finished = self.finished or event.get("type") == "final"
            if self.line > self.skip:
                out.append((self.line, event))
        return out


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """The events of a trace with full prompts; a last line still being written (a run in
    progress) is left out. A file that is not a trace raises LokalError (one line)."""
    path = Path(path)
    if not path.is_file():
        raise LokalError(f"no such trace file: {str(path)!r}")
    events = [event for _, event in TraceFollower(path).poll()]
    if events and not all(isinstance(e.get("type"), str) for e in events):
        raise LokalError(f"{path} is not a lokal trace: a line without an event type")
    return events


def _first_and_final(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None, int]:
    """The run_start and final events of a trace, read cheaply (the decisions, which hold
    the prompts, are not parsed), and the number of decisions."""
    first = final = None
    decisions = 0
    with path.open(encoding="utf-8", errors="replace") as file:
        for line in file:
            head = line[:40]
            if '"type": "decision"' in head:
                decisions += 1
                continue
            if (first is None and '"run_start"' in head) or '"final"' in head:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if event.get("type") == "run_start" and first is None:
                    first = event
                elif event.get("type") == "final":
                    final = event
    return first, final, decisions


def summarize(path: str | Path) -> dict[str, Any]:
    """One stored run in a line: question, status, when, tokens, duration, file."""
    path = Path(path)
    first, final, decisions = _first_and_final(path)
    started = (first or {}).get("time")
    if started is None:
        started = path.stat().st_mtime
    usage = (final or {}).get("usage") or {}
    return {
        "name": path.name,
        "file": str(path.resolve() if path.is_symlink() else path),  # a link: the trace
        "question": (first or {}).get("question", ""),
        "profile": (first or {}).get("profile", ""),
        "started": started,
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        # no final event yet: the run is still being written, or it was stopped
        "status": (final or {}).get("status", "unfinished"),
        "stop_reason": (final or {}).get("stop_reason", ""),
        "decisions": decisions,
        "tokens_in": int(usage.get("prompt_tokens") or 0),
        "tokens_out": int(usage.get("completion_tokens") or 0),
        "duration_s": (final or {}).get("duration_s"),
    }


def _trace_files(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        return iter(())
    files = [p for p in directory.iterdir() if p.is_file() and TRACE_NAME.match(p.name)]
    return iter(sorted(files, key=lambda p: (p.stat().st_mtime, p.name), reverse=True))


def list_traces(directory: Path | None = None, limit: int | None = 20) -> list[dict[str, Any]]:
    """The stored runs, newest first (at most ``limit``; None: all)."""
    out = []
    for path in _trace_files(directory or traces_dir()):
        if limit is not None and len(out) >= limit:
            break
        try:
            out.append(summarize(path))
        except OSError:  # removed while listing
            continue
    return out
