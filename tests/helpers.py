"""Shared test helpers (importable from tests as ``from helpers import ...``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"  # fixtures of the tests themselves
MODEL_CONFIG = REPO / "configs" / "model.yaml"
# the mock without tool preselection: no MiniLM to load, so a run takes a second
MOCK_YAML = """model:
  name: mock
  display_name: deterministic mock (no model)
  backend: mock
tool_calling:
  mode: prompt_json
"""


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


# the MCP server of the tests (tests/mcp/fixture_server.py), run over stdio
MCP_FIXTURE_SERVER = Path(__file__).resolve().parent / "mcp" / "fixture_server.py"


def mcp_stdio_server(*args: str, **fields: Any) -> dict[str, Any]:
    """A servers.json entry that runs the fixture MCP server with ``args``."""
    import sys

    return {"command": sys.executable, "args": [str(MCP_FIXTURE_SERVER), *args], **fields}


def staged_args(tool: dict[str, Any], question: str, score: Any) -> dict[str, Any]:
    """The arguments of the first call a staged decision makes for ``question`` with only
    ``tool`` on offer, the model scripted by ``score(prefix, continuation)`` (no
    preselection, no generated values: every value is a scored candidate)."""
    from lokal.config import load_profile
    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.llm.decide import generate_ai_message

    profile = load_profile(MODEL_CONFIG).with_tool_calling(
        mode="staged", preselect_k=None, staged={"generated_values": False}
    )
    result = generate_ai_message(
        profile,
        [{"role": "user", "content": question}],
        [tool],
        backend=ScriptedBackend(scorer=score),
    )
    return result.ai_message["tool_calls"][0]["args"]
