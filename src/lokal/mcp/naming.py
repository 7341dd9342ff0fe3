"""The names MCP tools get in lokal: ``{server}_{tool}``, within ``^[a-zA-Z0-9_-]{1,64}$``.

Every character outside ``[a-zA-Z0-9_-]`` becomes ``_`` (``text.shout`` → ``text_shout``); a
name longer than 64 characters keeps its first 55 and ends in ``_`` and 8 hex digits of a hash
of the server and tool names, so two long names stay apart. Names collide when they are equal
once case is ignored and ``-`` is read as ``_`` (the parser reads a call's name that way, so
``a_get-x`` and ``a_get_x`` would be ambiguous to it). Collisions are resolved in the order the
tools are given (servers in config order, tools in the order each server lists them): the first
tool keeps the name, the next ones get ``_2``, ``_3``… ; names in ``reserved`` (tools already
registered) are never given out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_NAME", "NAME_PATTERN", "assign_names", "name_key", "sanitize", "tool_name"]

MAX_NAME = 64
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize(text: str) -> str:
    """``text`` with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``."""
    return _BAD.sub("_", text) or "_"


def name_key(name: str) -> str:
    """What two names must not share: case ignored, ``-`` read as ``_``."""
    return name.lower().replace("-", "_")


def _fit(base: str, origin: str, suffix: str = "") -> str:
    """``base + suffix`` cut to 64 characters; a cut name ends in a hash of ``origin``."""
    if len(base) + len(suffix) <= MAX_NAME:
        return base + suffix
    digest = hashlib.sha1(origin.encode("utf-8")).hexdigest()[:8]
    keep = MAX_NAME - len(suffix) - len(digest) - 1
    return f"{base[:keep]}_{digest}{suffix}"


def tool_name(server: str, tool: str) -> str:
    """``{server}_{tool}``, sanitised and at most 64 characters (collisions not considered)."""
    return _fit(f"{sanitize(server)}_{sanitize(tool)}", f"{server}\0{tool}")


def assign_names(
    pairs: Iterable[tuple[str, str]], reserved: Iterable[str] = ()
) -> dict[tuple[str, str], str]:
    """A unique lokal name for each ``(server, tool)``, in the order given (see the module
    docstring); a pair given twice gets one name."""
    taken = {name_key(name) for name in reserved}
    names: dict[tuple[str, str], str] = {}
    for server, tool in pairs:
        if (server, tool) in names:
            continue
        base = f"{sanitize(server)}_{sanitize(tool)}"
        origin = f"{server}\0{tool}"
        name = _fit(base, origin)
        number = 1
        while name_key(name) in taken:
            number += 1
            name = _fit(base, origin, f"_{number}")
        taken.add(name_key(name))
        names[(server, tool)] = name
    return names
