"""``lokal trace view``: one self-contained HTML page for a run (inline CSS and JS, the trace
embedded as JSON; no network, no CDN), and the list of stored runs that ``lokal serve``
shows at ``/traces``.

The page's assets are package data (``viewer.html``, ``viewer.css``, ``viewer.js``), read with
``importlib.resources``. The trace is embedded in a ``<script type="application/json">``
with ``<``, ``>`` and ``&`` written as ``\\u003c``… so that no text of the run (a model that
writes ``</script>`` or ``<!--``) can end the script or the page early.
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from lokal.viewer.store import load_events

__all__ = ["build_page", "index_page", "script_json", "write_page"]

_PLACEHOLDER = re.compile(r"__(TITLE|CSS|JS|DATA)__")


@cache
def _asset(name: str) -> str:
    return resources.files("lokal.viewer").joinpath(name).read_text(encoding="utf-8")


def script_json(value: Any) -> str:
    """``value`` as JSON safe inside a ``<script>`` element of an HTML page."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    for char, escaped in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def build_page(
    events: list[dict[str, Any]],
    *,
    title: str | None = None,
    live: dict[str, str] | None = None,
) -> str:
    """The viewer page for ``events`` (a trace's dicts, expanded: ``lokal.trace.read_trace``).
    ``live``: ``{"events_url": ...}`` makes the page follow a run over server-sent events,
    appending each step as it arrives (``lokal serve``'s ``/traces/{name}``)."""
    if title is None:
        first = next((e for e in events if e.get("type") == "run_start"), {})
        title = f"lokal · {first.get('question') or 'run'}"
    payload: dict[str, Any] = {"events": events}
    if live:
        payload["live"] = live
    parts = {
        "TITLE": html.escape(" ".join(title.split())[:200]),
        "CSS": _asset("viewer.css"),
        "JS": _asset("viewer.js"),
        "DATA": script_json(payload),
    }
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], _asset("viewer.html"))


def write_page(trace: str | Path, out: str | Path | None = None) -> Path:
    """Write the page of the trace file ``trace`` to ``out`` (default: the trace's name with
    ``.html``); the path written."""
    trace = Path(trace)
    target = Path(out) if out is not None else trace.with_suffix(".html")
    page = build_page(load_events(trace))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target


def index_page(runs: list[dict[str, Any]], *, base: str = "/traces", folder: str = "") -> str:
    """The list of stored runs (``lokal.viewer.store.list_traces``), each linking to its
    page at ``{base}/{name}``."""
    items = []
    for run in runs:
        tokens = f"{run['tokens_in']} in / {run['tokens_out']} out tokens"
        duration = f" · {run['duration_s']:.1f} s" if run.get("duration_s") is not None else ""
        facts = f"{run['started_at']} · {run['status']}{duration} · {tokens} · {run['name']}"
        items.append(
            f'<li><a href="{html.escape(base)}/{html.escape(run["name"])}">'
            f"{html.escape(run['question'] or '(no question)')}</a>"
            f'<span class="facts">{html.escape(facts)}</span></li>'
        )
    body = "\n".join(items) or "<li>No stored runs yet: run <code>lokal run …</code>.</li>"
    where = f" in <code>{html.escape(folder)}</code>" if folder else ""
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>lokal · runs</title>\n<style>\n{_asset('viewer.css')}\n</style>\n</head>\n"
        f'<body>\n<header class="run-header"><p class="brand">lokal</p><h1>Runs</h1>'
        f"<p>Newest first{where}. A run still being written is followed live.</p></header>\n"
        f'<main>\n<ul class="runs" id="runs">\n{body}\n</ul>\n</main>\n</body>\n</html>\n'
    )
