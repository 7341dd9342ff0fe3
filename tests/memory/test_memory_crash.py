"""A crash mid-run loses at most the step in flight; concurrent runs on one conversation do not
corrupt it. Real processes: a run killed with SIGKILL while a tool blocks, and writers that
append to the same conversation at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from helpers import MODEL_CONFIG, REPO
from lokal.memory import ConversationStore

pytestmark = pytest.mark.slow  # real processes, killed and racing; seconds each

SCRIPT = r"""
import json, sys, time, pathlib
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.memory import Memory
from lokal.runtime import Agent
from lokal.tools.registry import ToolRegistry, tool

mode, conversation, flag, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

@tool
def quick(x: int) -> int:
    "Double x."
    return 2 * x

@tool
def block() -> str:
    "Block forever."
    pathlib.Path(flag).write_text("blocking")
    time.sleep(3600)
    return "never"

def call(name, args):
    return json.dumps({"content": "", "tool_calls": [{"name": name, "args": args}]})

for i in range(runs):
    if mode == "crash":
        replies = [call("quick", {"x": 21}), call("block", {})]
    else:
        replies = [call("quick", {"x": i}), f"answer {i} from {conversation}-{flag}"]
    agent = Agent(load_profile(MODEL_CONFIG), ToolRegistry([quick, block]),
                  backend=ScriptedBackend(replies))
    memory = Memory(conversation=conversation).attach(agent)
    agent.run(f"question {i} from {flag}", history=memory.history())
    memory.close()
""".replace("MODEL_CONFIG", repr(str(MODEL_CONFIG)))


def _env(home):
    return {**os.environ, "LOKAL_HOME": str(home), "PYTHONPATH": str(REPO / "tests")}


def test_a_run_killed_mid_tool_keeps_its_completed_steps(tmp_path):
    home, flag = tmp_path / "home", tmp_path / "blocking.flag"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), "crash", "crashy", str(flag), "1"], env=_env(home)
    )
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert process.poll() is None, "the run ended before blocking"
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    conn = sqlite3.connect(home / "lokal.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    store = ConversationStore(home / "lokal.db")
    (run,) = store.runs("crashy")
    assert run["finished"] is None  # the run never ended...
    messages = run["messages"]  # ...but every completed step is there
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(messages[2]["content"])["output"] == 42
    assert messages[3]["tool_calls"][0]["name"] == "block"
    # continuing the conversation repairs the unfinished run: the call in flight gets an
    # error result saying it was not run, so no tool call dangles, and the run (its process
    # gone: abandoned) is closed by a note that its question was not answered
    history = store.history("crashy")
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m["role"] for m in history] == roles
    assert history[-2]["tool_call_id"] == messages[3]["tool_calls"][0]["id"]
    assert history[-2]["status"] == "error" and "not run" in history[-2]["content"]
    assert "not answered" in history[-1]["content"]
    assert [r["kind"] for r in history.repairs] == ["missing_result", "unfinished_run"]
    assert history.repairs[1]["status"] == "abandoned"


def _check_conversation(store, name, expected_runs):
    runs = store.runs(name)
    assert len(runs) == expected_runs
    positions = []
    for run in runs:
        messages = run["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert run["status"] == "final"
        run_positions = [m["_meta"]["position"] for m in messages]
        assert run_positions == sorted(run_positions)  # ordered within the run
        positions += run_positions
    assert sorted(positions) == list(range(1, len(positions) + 1))  # no gap, no clash


def test_two_processes_append_to_one_conversation(tmp_path):
    home = tmp_path / "home"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), "append", "shared", f"p{n}", "6"], env=_env(home)
        )
        for n in range(2)
    ]
    assert [p.wait(timeout=120) for p in processes] == [0, 0]
    conn = sqlite3.connect(home / "lokal.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    _check_conversation(ConversationStore(home / "lokal.db"), "shared", 12)


def test_threads_append_to_one_conversation(tmp_path, monkeypatch):
    from lokal.config import load_profile
    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.memory import Memory
    from lokal.runtime import Agent
    from lokal.tools.registry import ToolRegistry, tool

    monkeypatch.setenv("LOKAL_HOME", str(tmp_path / "home"))

    @tool
    def quick(x: int) -> int:
        """Double x."""
        return 2 * x

    call = json.dumps({"content": "", "tool_calls": [{"name": "quick", "args": {"x": 1}}]})
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(5):
                agent = Agent(
                    load_profile(MODEL_CONFIG),
                    ToolRegistry([quick]),
                    backend=ScriptedBackend([call, f"done {n}.{i}"]),
                )
                memory = Memory(conversation="threads").attach(agent)
                agent.run(f"q {n}.{i}")
                memory.close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    _check_conversation(ConversationStore(), "threads", 20)
