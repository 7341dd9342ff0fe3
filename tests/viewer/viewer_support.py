"""What the viewer tests share: a scripted run recorded as a trace (a parallel tool turn, a
failing tool, a retried reply), the trace fixtures, and headless chromium through Playwright."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from helpers import MODEL_CONFIG, TEST_DATA, envelope
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.runtime import Agent, AgentSettings, JsonlTrace
from lokal.tools.registry import ToolRegistry, tool
from servers import AppServer

TRACES = TEST_DATA / "traces"
BUNDLED_RUN = TRACES / "bundled_run.jsonl"  # recorded from the bundled model (the lead's)
SCRIPTED_RUN = TRACES / "scripted_run.jsonl"  # recorded by record_scripted_run()
QUESTION = "What is 6 * 7, and what does notes.txt say?"


def scripted_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. 6 * 7.
        """
        time.sleep(0.05)
        return float(eval(expression, {"__builtins__": {}}))  # test double: fixed inputs

    @tool
    def file_reader(path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: a path inside the workspace.
        """
        time.sleep(0.08)
        raise FileNotFoundError(f"no such file: {path}")

    @tool
    def clock() -> str:
        """The time of day."""
        time.sleep(0.03)
        return "12:00"

    for item in (calculator, file_reader, clock):
        registry.register(item)
    return registry


SCRIPT = [
    # 1: a reply that names no known tool: retried with the error quoted
    envelope([("calculate", {"expression": "6 * 7"})]),
    # 1, retry: three calls in one turn, run in parallel; file_reader fails
    envelope(
        [
            ("calculator", {"expression": "6 * 7"}),
            ("file_reader", {"path": "notes.txt"}),
            ("clock", {}),
        ]
    ),
    # 2: the answer
    envelope(content="6 * 7 is 42; notes.txt could not be read (no such file)."),
]


def scripted_agent(pause_s: float = 0.0) -> Agent:
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=2, preselect_k=None)
    agent = Agent(
        profile,
        scripted_registry(),
        backend=ScriptedBackend(list(SCRIPT)),
        settings=AgentSettings(max_iterations=4),
    )
    if pause_s:
        agent.subscribe(lambda event: time.sleep(pause_s))
    return agent


def record_scripted_run(path: Path, pause_s: float = 0.0) -> Any:
    """Run the scripted agent, writing its trace to ``path`` line by line (with ``pause_s``
    after each event, for the live view); the RunResult."""
    agent = scripted_agent()
    trace = JsonlTrace(path)
    agent.subscribe(trace)
    if pause_s:
        agent.subscribe(lambda event: time.sleep(pause_s))
    try:
        return agent.run(QUESTION)
    finally:
        trace.close()


def recorded_run() -> Path:
    """The trace the page tests use: the bundled model's run when it is there, else the
    scripted one."""
    return BUNDLED_RUN if BUNDLED_RUN.is_file() else SCRIPTED_RUN


CHROMIUM_HINT = (
    "the browser tests need Debian's chromium and Playwright: "
    "`apt-get install -y chromium` (as root; `make install` does it) and "
    "`.venv/bin/pip install playwright` (in the dev extra); "
    "or set LOKAL_CHROMIUM to a chromium binary"
)


def chromium_path() -> str:
    """The chromium binary, or a failure saying how to install it (never a skip)."""
    import pytest

    candidates = [os.environ.get("LOKAL_CHROMIUM"), "chromium", "chromium-browser"]
    for name in candidates:
        if name and (found := shutil.which(name)):
            return found
    pytest.fail(CHROMIUM_HINT, pytrace=False)


class LiveServer(AppServer):
    """``lokal serve``'s app on loopback (uvicorn in a thread, a free port)."""
