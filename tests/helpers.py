"""Shared test helpers (importable from tests as ``from helpers import ...``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
MODEL_CONFIG = REPO / "configs" / "model.yaml"


def load_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def basic_tools() -> list[dict[str, Any]]:
    return load_json(DATA / "messages" / "tools_schema_basic.json")


def envelope(calls: list[tuple[str, dict]] | None = None, content: str = "") -> str:
    """A JSON envelope reply, as a model would write it."""
    return json.dumps(
        {"content": content, "tool_calls": [{"name": n, "args": a} for n, a in calls or []]},
        ensure_ascii=False,
    )
