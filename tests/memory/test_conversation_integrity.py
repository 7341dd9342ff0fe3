"""Conversation integrity (issue 10, part 1): a stored conversation can always be continued.

Call ids are unique within a conversation; a turn's ToolMessages are stored in call order; every
run's outcome is stored (guard stops and forced answers too); a stored history that would leave
a call without its result is repaired on load, and the repair is recorded. Each test continues
a conversation after one kind of stop and checks that what the next run sends the model is a
valid OpenAI conversation. Real SQLite files in ``tmp_path``; no model (scripted replies).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from helpers import MODEL_CONFIG, REPO, envelope
from lokal.config import load_profile
from lokal.events import RunStart, ToolEnd
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.memory import ConversationRecorder, ConversationStore
from lokal.memory.conversations import sanitize_history
from lokal.messages import make_tool_message, to_openai_messages
from lokal.runtime import Agent, AgentSettings, JsonlTrace
from lokal.tools.registry import ToolRegistry, tool

NAME = "chat"


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: digits and + - * /.
    """
    return str(eval(expression, {"__builtins__": {}}))  # test input only


@tool
def nap(seconds: float, label: str) -> str:
    """Sleep, then give the label back.

    Args:
        seconds: how long to sleep.
        label: what to give back.
    """
    time.sleep(seconds)
    return label


def profile(mode: str = "prompt_json"):
    return load_profile(MODEL_CONFIG, "mock").with_tool_calling(
        mode=mode, max_retries=0, preselect_k=None
    )


class Session:
    """One conversation in a real SQLite file; each ``run`` continues it like ``lokal run
    --conversation`` does (a new store, recorder and agent per run)."""

    def __init__(self, path):
        self.path = path

    def run(self, question, replies, *, mode="prompt_json", trace=None, settings=None, **options):
        store = ConversationStore(self.path)
        backend = ScriptedBackend(replies)
        agent = Agent(
            profile(mode),
            ToolRegistry([calculator, nap]),
            backend=backend,
            settings=settings or AgentSettings(**options),
        )
        ConversationRecorder(store, NAME).attach(agent)
        if trace is not None:
            agent.subscribe(trace)
        history = store.history(NAME)
        result = agent.run(question, history=history)
        store.close()
        return result, backend, history

    def store(self):
        return ConversationStore(self.path)


@pytest.fixture
def session(tmp_path):
    return Session(tmp_path / "lokal.db")


def calc(*expressions):
    return envelope([("calculator", {"expression": e}) for e in expressions])


def openai_problems(messages):
    """What makes ``messages`` (OpenAI chat format) an invalid conversation: every assistant
    tool call is followed by exactly one tool message with its id, before the next user or
    assistant message; no other tool message; call ids unique in the whole conversation."""
    problems = []
    ids = set()
    open_calls: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(f"[{index}] unknown role {role!r}")
        if role == "tool":
            expected = open_calls.pop(0) if open_calls else None
            if message.get("tool_call_id") != expected:
                problems.append(
                    f"[{index}] tool message for {message.get('tool_call_id')!r},"
                    f" expected {expected!r}"
                )
            continue
        if open_calls:
            problems.append(f"[{index}] {role} message while calls wait: {open_calls}")
            open_calls = []
        if role == "assistant":
            calls = message.get("tool_calls") or []
            for call in calls:
                ident = call.get("id")
                if not isinstance(ident, str) or not ident:
                    problems.append(f"[{index}] a call without id")
                elif ident in ids:
                    problems.append(f"[{index}] call id {ident!r} used twice")
                ids.add(ident)
                open_calls.append(ident)
            if not calls and not (message.get("content") or "").strip():
                problems.append(f"[{index}] an empty assistant message")
    if open_calls:
        problems.append(f"the conversation ends with calls that wait: {open_calls}")
    return problems


def assert_valid(messages):
    """``messages`` (lokal messages) make a valid OpenAI conversation."""
    converted = to_openai_messages(messages)
    assert openai_problems(converted) == [], json.dumps(converted, indent=1)


def assert_prompt_valid(backend):
    """The first request of a run: what the model was given is a valid conversation (the
    caller's messages, and in builtin mode the chat-template messages themselves)."""
    request = backend.requests[0]
    assert_valid(request.conversation)
    if request.pass_tools or any(m.get("tool_calls") for m in request.messages):
        problems = openai_problems(request.messages)
        assert problems == [], json.dumps(request.messages, indent=1)


def stored_call_ids(store):
    return [
        call["id"]
        for run in store.runs(NAME)
        for message in run["messages"]
        for call in message.get("tool_calls") or []
    ]


def run_outcomes(history):
    """(question, last assistant content) of each run in a history."""
    outcomes, question, answer = [], None, None
    for message in history:
        if message["role"] == "user":
            if question is not None:
                outcomes.append((question, answer))
            question, answer = message["content"], None
        elif message["role"] == "assistant" and not message.get("tool_calls"):
            answer = message["content"]
    if question is not None:
        outcomes.append((question, answer))
    return outcomes


def check_continuation(session, mode="prompt_json"):
    """Two more runs: one with a tool call, then one that only answers. Returns the second's
    backend. The new call's id must be new to the conversation."""
    store = session.store()
    before = stored_call_ids(store)
    store.close()
    result, backend, history = session.run("and 5*5?", [calc("5*5"), "It is 25."], mode=mode)
    assert result.status == "final"
    assert_valid(history)
    assert_prompt_valid(backend)
    store = session.store()
    new = stored_call_ids(store)[len(before) :]
    assert len(new) == 1 and new[0] not in before, f"{new} after {before}"
    store.close()
    result, backend, history = session.run("thanks", ["You are welcome."], mode=mode)
    assert result.status == "final"
    assert_valid(history)
    assert_prompt_valid(backend)
    return backend, history


# -- each kind of stop, then continue ------------------------------------------------------


@pytest.mark.parametrize("mode", ["prompt_json", "builtin"])
def test_continue_after_a_repeated_call_guard_stop(session, mode):
    same = calc("2+2")
    result, _, _ = session.run(
        "2+2?", [same, same, same, "The answer is 4."], mode=mode, repeat_limit=3
    )
    assert result.status == "repeated_call" and result.answer == "The answer is 4."
    store = session.store()
    (run,) = store.runs(NAME)
    # the repeat that was not run is not stored; the forced answer ends the run
    assert_valid(run["messages"])
    assert run["messages"][-1]["content"] == "The answer is 4."
    store.close()
    _, history = check_continuation(session, mode)
    assert run_outcomes(history)[0] == ("2+2?", "The answer is 4.")


def test_continue_after_a_time_budget_stop_between_decision_and_tools(session):
    settings = AgentSettings()

    def late(request):
        settings.time_budget_s = 1e-9  # the budget runs out while the model writes
        return calc("2+2")

    result, _, _ = session.run("1+1 then 2+2?", [calc("1+1"), late], settings=settings)
    assert result.status == "time_budget" and not result.answered
    assert result.answer.startswith("No final answer: the time budget")
    assert len([e for e in result.events if isinstance(e, ToolEnd)]) == 1
    store = session.store()
    (run,) = store.runs(NAME)
    # the call the budget stopped is not stored; the run's outcome is its final message
    assert_valid(run["messages"])
    assert {k: run["messages"][-1][k] for k in ("role", "content", "tool_calls")} == {
        "role": "assistant",
        "content": result.answer,
        "tool_calls": [],
    }
    store.close()
    _, history = check_continuation(session)
    assert run_outcomes(history)[0] == ("1+1 then 2+2?", result.answer)


def test_continue_after_a_decision_error_whose_forced_answer_fails_too(session):
    unknown = envelope([("web_search", {"q": "x"})])
    result, _, _ = session.run("6*7 and then search", [calc("6*7"), unknown, unknown])
    assert result.status == "decision_error" and not result.answered
    store = session.store()
    (run,) = store.runs(NAME)
    assert_valid(run["messages"])
    # the run's outcome (the results in hand) is stored as its final message
    assert run["messages"][-1]["content"] == result.answer
    store.close()
    _, history = check_continuation(session)
    assert run_outcomes(history)[0] == ("6*7 and then search", result.answer)


def test_continue_after_a_decision_error_with_a_forced_answer(session):
    unknown = envelope([("web_search", {"q": "x"})])
    result, _, _ = session.run("search", [unknown, "I cannot search the web."])
    assert result.status == "decision_error" and result.answered
    _, history = check_continuation(session)
    assert run_outcomes(history)[0] == ("search", "I cannot search the web.")


@pytest.mark.parametrize("answered", [True, False])
def test_continue_after_max_iterations(session, answered):
    unknown = envelope([("web_search", {"q": "x"})])
    final = "It counted 1, then 2." if answered else unknown
    result, _, _ = session.run("count", [calc("1+0"), calc("1+1"), final], max_iterations=2)
    assert result.status == "max_iterations" and result.answered is answered
    store = session.store()
    (run,) = store.runs(NAME)
    assert_valid(run["messages"])
    assert run["messages"][-1]["content"] == result.answer
    store.close()
    _, history = check_continuation(session)
    assert run_outcomes(history)[0] == ("count", result.answer)


# -- ordering and ids ----------------------------------------------------------------------


def test_tool_messages_of_a_parallel_turn_are_stored_in_call_order(session):
    calls = envelope(
        [
            ("nap", {"seconds": 0.45, "label": "first"}),
            ("nap", {"seconds": 0.25, "label": "second"}),
            ("nap", {"seconds": 0.05, "label": "third"}),
        ]
    )
    result, _, _ = session.run("nap three times", [calls, "done"])
    ends = [e.call_id for e in result.events if isinstance(e, ToolEnd)]
    assert ends == ["call_003", "call_002", "call_001"]  # they finished in reverse order
    store = session.store()
    (run,) = store.runs(NAME)
    tool_ids = [m["tool_call_id"] for m in run["messages"] if m["role"] == "tool"]
    assert tool_ids == ["call_001", "call_002", "call_003"]
    positions = [m["_meta"]["position"] for m in run["messages"]]
    assert positions == sorted(positions)
    labels = [
        json.loads(m["content"])["output"] for m in store.history(NAME) if m["role"] == "tool"
    ]
    assert labels == ["first", "second", "third"]
    store.close()


def test_call_ids_stay_unique_when_two_runs_start_from_the_same_history(session):
    session.run("first", [calc("1+1"), "2"])
    # two runs that start from the same history (two processes at once) number their calls
    # alike; the loaded conversation still has one id per call
    store = session.store()
    snapshot = store.history(NAME)
    store.close()
    for question in ("second", "third"):
        store = ConversationStore(session.path)
        backend = ScriptedBackend([calc("2+2"), "4"])
        agent = Agent(profile(), ToolRegistry([calculator]), backend=backend)
        ConversationRecorder(store, NAME).attach(agent)
        agent.run(question, history=list(snapshot))
        store.close()
    store = session.store()
    history = store.history(NAME)
    assert_valid(history)
    assert [r["kind"] for r in history.repairs] == ["renamed_call_id"]
    store.close()
    check_continuation(session)


# -- repair on load ------------------------------------------------------------------------


def _legacy_conversation(store):
    """What the old recorder stored for a run stopped by the repeated-call guard (the call
    that was not run, then the forced answer), and a turn stored in completion order."""
    run = store.start_run(NAME, "2+2?")
    store.append(run, {"role": "user", "content": "2+2?"})
    first = {"id": "call_001", "name": "calculator", "args": {"expression": "2+2"}}
    store.append(run, {"role": "assistant", "content": "", "tool_calls": [first]})
    store.append(run, make_tool_message(first, output="4"))
    again = {**first, "id": "call_002"}
    store.append(run, {"role": "assistant", "content": "", "tool_calls": [again]})
    store.append(run, {"role": "assistant", "content": "It is 4.", "tool_calls": []})
    store.finish_run(run, status="repeated_call", answer="It is 4.")
    run = store.start_run(NAME, "1+1 and 3+3?")
    store.append(run, {"role": "user", "content": "1+1 and 3+3?"})
    a = {"id": "call_002", "name": "calculator", "args": {"expression": "1+1"}}
    b = {"id": "call_003", "name": "calculator", "args": {"expression": "3+3"}}
    store.append(run, {"role": "assistant", "content": "", "tool_calls": [a, b]})
    store.append(run, make_tool_message(b, output="6"))
    store.append(run, make_tool_message(a, output="2"))
    store.append(run, {"role": "assistant", "content": "2 and 6.", "tool_calls": []})
    store.finish_run(run, status="final", answer="2 and 6.")


def test_a_stored_call_without_result_is_repaired_on_load_and_the_repair_recorded(
    session, tmp_path, caplog
):
    store = session.store()
    _legacy_conversation(store)
    with caplog.at_level("WARNING", logger="lokal.memory"):
        history = store.history(NAME)
    store.close()
    assert_valid(history)
    kinds = [r["kind"] for r in history.repairs]
    assert "missing_result" in kinds and "renamed_call_id" in kinds and "reordered" in kinds
    missing = next(r for r in history.repairs if r["kind"] == "missing_result")
    assert missing["call_id"] == "call_002" and missing["name"] == "calculator"
    repaired = next(m for m in history if m.get("tool_call_id") == "call_002")
    assert repaired["status"] == "error"
    assert "not run" in json.loads(repaired["content"])["error"]
    # the results of the second run come back in call order, under ids of their own
    outputs = [json.loads(m["content"])["output"] for m in history if m["role"] == "tool"]
    assert outputs == ["4", None, "2", "6"]
    assert "repaired" in caplog.text
    # the next run records the repairs in its trace (run_start), and its prompt is valid
    trace = JsonlTrace(tmp_path / "trace.jsonl")
    result, backend, _ = session.run("and 5*5?", [calc("5*5"), "25"], trace=trace)
    trace.close()
    start = next(e for e in result.events if isinstance(e, RunStart))
    assert [r["kind"] for r in start.history_repairs] == kinds
    lines = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert lines[0]["type"] == "run_start" and lines[0]["history_repairs"]
    assert_prompt_valid(backend)
    check_continuation(session)


def test_repair_keeps_a_valid_conversation_as_it_is():
    first = {"id": "call_001", "name": "calculator", "args": {"expression": "1+1"}}
    messages = [
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "", "tool_calls": [first]},
        make_tool_message(first, output="2"),
        {"role": "assistant", "content": "2", "tool_calls": []},
    ]
    repaired = sanitize_history(messages)
    assert repaired == messages and repaired.repairs == []


def test_the_runtime_repairs_a_history_it_is_given(session):
    dangling = {"id": "call_001", "name": "calculator", "args": {"expression": "1+1"}}
    history = [
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "", "tool_calls": [dangling]},
    ]
    backend = ScriptedBackend(["Hello."])
    agent = Agent(profile(), ToolRegistry([calculator]), backend=backend)
    result = agent.run("hi", history=history)
    assert_prompt_valid(backend)
    start = result.events[0]
    assert isinstance(start, RunStart)
    assert [r["kind"] for r in start.history_repairs] == ["missing_result"]


def test_repair_drops_results_for_no_call_second_results_and_empty_messages():
    first = {"id": "call_001", "name": "calculator", "args": {"expression": "1+1"}}
    messages = [
        {"role": "user", "content": "1+1?"},
        make_tool_message({"id": "call_009", "name": "calculator"}, output="?"),
        {"role": "assistant", "content": "", "tool_calls": [first]},
        make_tool_message(first, output="2"),
        make_tool_message(first, output="2 again"),
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "assistant", "content": "2", "tool_calls": []},
    ]
    repaired = sanitize_history(messages)
    assert_valid(repaired)
    assert [r["kind"] for r in repaired.repairs] == [
        "orphan_result",
        "duplicate_result",
        "empty_message",
    ]
    assert [r["index"] for r in repaired.repairs] == [1, 4, 5]
    assert [m["role"] for m in repaired] == ["user", "assistant", "tool", "assistant"]


def test_new_call_ids_never_take_an_id_the_history_has(session):
    taken = {"id": "call_002", "name": "calculator", "args": {"expression": "1+1"}}
    history = [
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "", "tool_calls": [taken]},
        make_tool_message(taken, output="2"),
        {"role": "assistant", "content": "2", "tool_calls": []},
    ]
    backend = ScriptedBackend([calc("2+2"), "4"])
    agent = Agent(profile(), ToolRegistry([calculator]), backend=backend)
    result = agent.run("2+2?", history=history)
    assert_valid(result.messages)
    new = [c["id"] for m in result.messages[4:] for c in m.get("tool_calls") or []]
    assert new == ["call_003"]


# -- a run killed with SIGKILL in the middle of a tool turn --------------------------------

SCRIPT = r"""
import json, pathlib, sys, time
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.memory import ConversationRecorder, ConversationStore
from lokal.runtime import Agent
from lokal.tools.registry import ToolRegistry, tool

db, flag = sys.argv[1], sys.argv[2]

@tool
def quick(x: int) -> int:
    "Double x."
    return 2 * x

@tool
def block(seconds: float) -> str:
    "Sleep for a long time."
    pathlib.Path(flag).write_text("blocking")
    time.sleep(seconds)
    return "never"

def calls(*pairs):
    return json.dumps({"content": "", "tool_calls": [{"name": n, "args": a} for n, a in pairs]})

profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=0, preselect_k=None)
runs = [
    ("double 1", [calls(("quick", {"x": 1})), "It is 2."]),
    ("double 21 and wait", [calls(("quick", {"x": 21}), ("block", {"seconds": 3600}))]),
]
for question, replies in runs:
    store = ConversationStore(db)
    agent = Agent(profile, ToolRegistry([quick, block]), backend=ScriptedBackend(replies))
    ConversationRecorder(store, "killed").attach(agent)
    agent.run(question, history=store.history("killed"))
""".replace("MODEL_CONFIG", repr(str(MODEL_CONFIG)))


def _stored_tool_messages(db) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM messages WHERE role='tool'").fetchone()[0]
    finally:
        conn.close()


def test_continue_after_a_run_killed_mid_tool_turn(tmp_path):
    db, flag = tmp_path / "lokal.db", tmp_path / "blocking.flag"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    path = os.pathsep.join(p for p in [str(REPO / "tests"), os.environ.get("PYTHONPATH")] if p)
    env = {**os.environ, "PYTHONPATH": path, "LOKAL_HOME": str(tmp_path)}
    process = subprocess.Popen([sys.executable, str(script), str(db), str(flag)], env=env)
    try:
        deadline = time.monotonic() + 120
        # kill once the tool blocks and the quick call of the same turn is stored
        while not flag.exists() or _stored_tool_messages(db) < 2:
            assert process.poll() is None, "the script ended before the tool blocked"
            assert time.monotonic() < deadline, "the blocking tool never started"
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    store = ConversationStore(db)
    first, killed = store.runs("killed")
    assert first["status"] == "final" and killed["finished"] is None
    history = store.history("killed")
    store.close()
    assert_valid(history)
    finished = ["user", "assistant", "tool", "assistant"]
    # its completed steps, repaired, and a note that its question was not answered
    killed = ["user", "assistant", "tool", "tool", "assistant"]
    assert [m["role"] for m in history] == finished + killed
    quick_result, block_result = history[6], history[7]
    assert json.loads(quick_result["content"])["output"] == 42
    assert block_result["name"] == "block" and block_result["status"] == "error"
    assert "not run" in json.loads(block_result["content"])["error"]
    assert [(r["kind"], r.get("name")) for r in history.repairs] == [
        ("missing_result", "block"),
        ("unfinished_run", None),
    ]

    # the next run (in this process) is given a valid conversation and records the repair
    backend = ScriptedBackend(["Doubling 21 gives 42; the wait did not finish."])
    store = ConversationStore(db)
    agent = Agent(profile(), ToolRegistry([calculator]), backend=backend)
    ConversationRecorder(store, "killed").attach(agent)
    result = agent.run("what happened?", history=store.history("killed"))
    assert result.status == "final"
    assert_prompt_valid(backend)
    assert isinstance(result.events[0], RunStart)
    kinds = [r["kind"] for r in result.events[0].history_repairs]
    assert kinds == ["missing_result", "unfinished_run"]
    assert "double 21 and wait" in json.dumps(backend.requests[0].conversation)
    # the run that recorded it stored the killed run's status
    assert [r["status"] for r in store.runs("killed")] == ["final", "abandoned", "final"]
    store.close()
