"""Runs that did not end with an answer (issue 19, part 2): Ctrl-C stores the run as
``interrupted`` with what it had; a run left without a status (its process killed) is found at
load, closed by a note, reported (``history_repairs``, lokal run's progress), and marked
``abandoned`` by the next run. Either way the next run's history never holds unanswered
questions one after another. Real SQLite files; scripted replies, no model."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from helpers import MOCK_YAML, MODEL_CONFIG, envelope
from lokal.config import load_profile
from lokal.events import DecisionMade, RunStart
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.memory import ConversationRecorder, ConversationStore
from lokal.runtime import Agent
from lokal.tools.registry import ToolRegistry, tool

NAME = "chat"


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: digits and + - * /.
    """
    return str(eval(expression, {"__builtins__": {}}))  # test input only


def _agent(store: ConversationStore, replies: list[str]) -> tuple[Agent, ScriptedBackend]:
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=0, preselect_k=None)
    backend = ScriptedBackend(replies)
    agent = Agent(profile, ToolRegistry([calculator]), backend=backend)
    ConversationRecorder(store, NAME).attach(agent)
    return agent, backend


def _ctrl_c_after_tools(event) -> None:
    """Ctrl-C on the second decision, once a tool turn is done."""
    if isinstance(event, DecisionMade) and event.iteration == 2:
        raise KeyboardInterrupt


def _no_question_left_hanging(conversation: list[dict]) -> None:
    roles = [m["role"] for m in conversation if m["role"] != "system"]
    for before, after in itertools.pairwise(roles):
        assert (before, after) != ("user", "user"), roles


def test_six_interrupted_runs_then_a_run_that_answers(tmp_path):
    db = tmp_path / "lokal.db"
    for n in range(6):
        store = ConversationStore(db)
        agent, _ = _agent(store, [envelope([("calculator", {"expression": f"{n}+1"})]), "late"])
        agent.subscribe(_ctrl_c_after_tools)
        with pytest.raises(KeyboardInterrupt):
            agent.run(f"question {n}", history=store.history(NAME))
        store.close()

    store = ConversationStore(db)
    runs = store.runs(NAME)
    assert [r["status"] for r in runs] == ["interrupted"] * 6
    assert all(r["finished"] is not None and "Ctrl-C" in r["stop_reason"] for r in runs)
    # what each had: the question, the calls, their result, and the outcome
    assert [m["role"] for m in runs[0]["messages"]] == ["user", "assistant", "tool", "assistant"]
    outcome = runs[0]["messages"][-1]["content"]
    assert outcome.startswith("No final answer: the run was interrupted (Ctrl-C).")
    assert "calculator" in outcome and "1" in outcome

    history = store.history(NAME)
    assert history.repairs == []  # stored whole: nothing to repair
    agent, backend = _agent(store, ["Here is an answer."])
    result = agent.run("question 6", history=history)
    assert result.status == "final"
    sent = backend.requests[0].conversation
    _no_question_left_hanging(sent)
    assert sum("interrupted (Ctrl-C)" in str(m.get("content")) for m in sent) == 6
    store.close()


def test_ctrl_c_while_a_tool_runs_closes_the_turn(tmp_path):
    @tool
    def slow(label: str) -> str:
        """Press Ctrl-C, then take a while.

        Args:
            label: what to give back.
        """
        # Ctrl-C: SIGINT to the main thread (where Linux delivers a process's signal)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(2)
        return label

    store = ConversationStore(tmp_path / "lokal.db")
    agent, _ = _agent(store, [envelope([("slow", {"label": "x"})]), "never"])
    agent.registry.register(slow)
    with pytest.raises(KeyboardInterrupt):
        agent.run("wait", history=store.history(NAME))
    (run,) = store.runs(NAME)
    assert run["status"] == "interrupted"
    user, calls, result, outcome = run["messages"]
    assert (user["role"], calls["role"], outcome["role"]) == ("user", "assistant", "assistant")
    assert result["name"] == "slow" and result["status"] == "error"
    assert "not finished: the run was interrupted" in result["content"]
    assert store.history(NAME).repairs == []  # the call has its result: nothing dangles
    time.sleep(2.5)  # the tool ends after the run: its result is not stored
    assert len(store.runs(NAME)[0]["messages"]) == 4
    store.close()


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _killed_runs(db, count: int, owner: str | None) -> ConversationStore:
    """``count`` runs as a killed process leaves them: a question, no status."""
    store = ConversationStore(db)
    for n in range(count):
        run = store.start_run(NAME, f"killed {n}")
        store.append(run, {"role": "user", "content": f"killed {n}"})
        store._write(lambda c, r=run: c.execute("UPDATE runs SET owner=? WHERE id=?", (owner, r)))
    return store


@pytest.mark.parametrize("owner", ["dead", None])  # None: written before owners were kept
def test_runs_left_without_a_status_are_repaired_reported_and_marked(tmp_path, owner):
    owner = f"{socket.gethostname()}:{_dead_pid()}" if owner else None
    store = _killed_runs(tmp_path / "lokal.db", 6, owner)
    history = store.history(NAME)
    assert [m["role"] for m in history] == ["user", "assistant"] * 6
    assert all("not answered" in m["content"] for m in history[1::2])
    repairs = history.repairs
    assert [(r["kind"], r["status"]) for r in repairs] == [("unfinished_run", "abandoned")] * 6
    assert [r["run_id"] for r in repairs] == [r["id"] for r in store.runs(NAME)]
    assert all(r["status"] is None for r in store.runs(NAME))  # loading writes nothing

    agent, backend = _agent(store, ["An answer."])
    result = agent.run("and now?", history=history)
    start = result.events[0]
    assert isinstance(start, RunStart) and len(start.history_repairs) == 6
    _no_question_left_hanging(backend.requests[0].conversation)
    # the run that continued the conversation stored their status
    statuses = [r["status"] for r in store.runs(NAME)]
    assert statuses == ["abandoned"] * 6 + ["final"]
    again = store.history(NAME)  # still closed by their notes, still reported
    assert [r["status"] for r in again.repairs] == ["abandoned"] * 6
    store.close()


def test_a_run_still_going_on_is_not_marked(tmp_path):
    store = _killed_runs(tmp_path / "lokal.db", 1, f"{socket.gethostname()}:{os.getpid()}")
    history = store.history(NAME)
    assert [(r["kind"], r["status"]) for r in history.repairs] == [("unfinished_run", "running")]
    assert "still going on" in history[-1]["content"]
    agent, _ = _agent(store, ["An answer."])
    agent.run("meanwhile?", history=history)
    assert [r["status"] for r in store.runs(NAME)] == [None, "final"]
    store.close()


def test_lokal_run_reports_the_repair(tmp_path, isolated_lokal_home, capsys):
    from lokal.cli import main

    _killed_runs(isolated_lokal_home / "lokal.db", 2, None).close()
    config = tmp_path / "mock.yaml"
    config.write_text(MOCK_YAML, encoding="utf-8")
    argv = ["run", "hello", "--model_config", str(config), "--conversation", NAME]
    assert main([*argv, "--no-trace"]) == 0
    err = capsys.readouterr().err
    assert "2 unfinished run(s) closed by a note: run 1 (abandoned), run 2 (abandoned)" in err
    store = ConversationStore(isolated_lokal_home / "lokal.db")
    assert [r["status"] for r in store.runs(NAME)] == ["abandoned", "abandoned", "final"]
    store.close()
