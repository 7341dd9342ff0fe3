"""Typed run events: each kind is a class whose ``to_dict()`` is the JSON object the trace has
always written, and ``event_from_dict`` reads it back."""

from __future__ import annotations

import json

import pytest

from helpers import DATA, MODEL_CONFIG, envelope
from lokal.config import load_profile
from lokal.errors import LokalError
from lokal.events import (
    EVENT_CLASSES,
    EVENT_TYPES,
    DecisionMade,
    DecisionStart,
    EventError,
    Final,
    Guard,
    ModelLoad,
    RunEvent,
    RunStart,
    ToolEnd,
    ToolStart,
    event_from_dict,
)
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.runtime import Agent, AgentSettings, JsonlTrace
from lokal.skills.builtin import register_builtin_tools
from lokal.skills.workspace import Workspace
from lokal.tools.registry import ToolRegistry, tool

STAMPS = ("type", "seq", "time", "elapsed_s")
TOOL = ("iteration", "index", "call_id", "name", "args")
TOOL_START = ("start_perf", "start_time")
TOOL_END = (*TOOL_START, "end_perf", "end_time", "duration_s", "status", "error", "timed_out")

# the keys of each event type, in order, as the trace wrote them before events were typed
# (recorded from mock and scripted runs); a type with variants lists each
EXPECTED_KEYS: dict[str, set[tuple[str, ...]]] = {
    "run_start": {
        (
            *STAMPS,
            "question",
            "profile",
            "strategy",
            "tools",
            "max_iterations",
            "history_repairs",
            "memory",
        )
    },
    "model_load": {(*STAMPS, "model", "duration_s"), (*STAMPS, "model", "duration_s", "component")},
    "decision_start": {(*STAMPS, "iteration", "purpose")},
    "decision": {
        (
            *STAMPS,
            "iteration",
            "purpose",
            "status",
            "prompt_ref",
            "prompt_messages",
            "raw_text",
            "parse",
            "attempts",
            "usage",
            "latency_ms",
            "ai_message",
            "error",
            # added with the trace viewer: how tools reached the model, and which model
            "tool_calling",
            "model",
        )
    },
    "tool_start": {(*STAMPS, *TOOL, *TOOL_START), (*STAMPS, *TOOL, "reused", *TOOL_START)},
    "tool_end": {
        (*STAMPS, *TOOL, *TOOL_END, "message"),
        (*STAMPS, *TOOL, "reused", *TOOL_END, "message"),
    },
    "guard": {
        (*STAMPS, "guard", "iteration"),
        (*STAMPS, "guard", "iteration", "call", "times"),
        (*STAMPS, "guard", "iteration", "budget_s"),
    },
    "final": {
        (
            *STAMPS,
            "status",
            "answer",
            "answered",
            "stop_reason",
            "iterations",
            "usage",
            "duration_s",
            "source",
        )
    },
}

STAMPED = {"seq": 3, "time": 1_700_000_000.25, "elapsed_s": 0.5}
CALL = {"iteration": 2, "index": 0, "call_id": "call_002", "name": "lookup", "args": {"n": 1}}
MESSAGE = {
    "role": "tool",
    "tool_call_id": "call_002",
    "name": "lookup",
    "status": "success",
    "content": '{"status": "success", "output": "record 1", "error": null}',
}
SAMPLES: list[RunEvent] = [
    RunStart(
        question="Look it up",
        profile="mock",
        strategy="react",
        tools=["lookup"],
        max_iterations=20,
        history_repairs=[{"kind": "missing_result", "call_id": "call_001"}],
        memory={"notes": 1, "min_score": 0.3, "selected": []},
        **STAMPED,
    ),
    ModelLoad(model="SmolLM2-135M-Instruct", duration_s=0.01, **STAMPED),
    ModelLoad(model="all-MiniLM-L6-v2", duration_s=0.5, component="embeddings", **STAMPED),
    DecisionStart(iteration=1, purpose="decide", **STAMPED),
    DecisionMade(
        iteration=1,
        purpose="decide",
        status="success",
        prompt_ref={"hash": "ab", "base": None, "parts": ["cd"]},
        prompt_messages={"cd": {"role": "user", "content": "Look it up"}},
        raw_text='{"content": "hi", "tool_calls": []}',
        parse={"format": "json_envelope", "repaired": False, "attempts": 1},
        attempts=[{"raw_text": "hi", "status": "success"}],
        usage={"prompt_tokens": 10, "completion_tokens": 5},
        latency_ms=12.5,
        ai_message={"role": "assistant", "content": "hi", "tool_calls": []},
        error=None,
        **STAMPED,
    ),
    DecisionMade(  # expanded: the prompt in full
        iteration=2,
        purpose="final",
        status="error",
        prompt=[{"role": "user", "content": "Look it up"}],
        error={"type": "parse_error", "message": "no JSON"},
        **STAMPED,
    ),
    ToolStart(**CALL, start_perf=10.0, start_time=1_700_000_000.0, **STAMPED),
    ToolStart(**CALL, reused=True, start_perf=10.0, start_time=1_700_000_000.0, **STAMPED),
    ToolEnd(
        **CALL,
        start_perf=10.0,
        start_time=1_700_000_000.0,
        end_perf=10.5,
        end_time=1_700_000_000.5,
        duration_s=0.5,
        status="error",
        error="TimeoutError: timed out after 1 s",
        timed_out=True,
        message=MESSAGE,
        **STAMPED,
    ),
    ToolEnd(**CALL, reused=True, message=MESSAGE, **STAMPED),
    Guard(guard="max_iterations", iteration=20, **STAMPED),
    Guard(guard="repeated_call", iteration=3, call={"id": "call_004"}, times=3, **STAMPED),
    Guard(guard="time_budget", iteration=0, budget_s=5.0, **STAMPED),
    Final(
        status="final",
        answer="4",
        answered=True,
        stop_reason="the model answered",
        iterations=1,
        usage={"prompt_tokens": 10, "completion_tokens": 5},
        duration_s=0.7,
        **STAMPED,
    ),
]


def test_the_event_types_are_the_classes_types():
    assert EVENT_TYPES == (
        "run_start",
        "model_load",
        "decision_start",
        "decision",
        "tool_start",
        "tool_end",
        "guard",
        "final",
    )
    assert tuple(cls.type for cls in EVENT_CLASSES) == EVENT_TYPES
    assert set(EXPECTED_KEYS) == set(EVENT_TYPES)
    assert {type(e) for e in SAMPLES} == set(EVENT_CLASSES)  # every class sampled


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_every_event_round_trips_through_its_dict(event):
    data = event.to_dict()
    assert list(data)[:4] == ["type", "seq", "time", "elapsed_s"] and data["type"] == event.type
    back = event_from_dict(data)
    assert type(back) is type(event) and back == event
    assert back.to_dict() == data and list(back.to_dict()) == list(data)
    # through JSON too, as a trace line
    assert event_from_dict(json.loads(json.dumps(data))) == event


def test_fields_written_only_when_set():
    plain, reused = SAMPLES[6], SAMPLES[7]
    assert "reused" not in plain.to_dict() and reused.to_dict()["reused"] is True
    chat, embeddings = SAMPLES[1], SAMPLES[2]  # a chat model's load has no component
    assert "component" not in chat.to_dict()
    assert embeddings.to_dict()["component"] == "embeddings"
    assert set(Guard(guard="max_iterations", iteration=1).to_dict()) == {
        "type",
        "guard",
        "iteration",
    }  # not emitted yet: no stamps either
    expanded = SAMPLES[5].to_dict()
    assert "prompt_ref" not in expanded and "prompt_messages" not in expanded
    assert list(expanded)[4:8] == ["iteration", "purpose", "status", "prompt"]


def test_unknown_keys_are_kept_in_extra_and_written_back():
    data = {**SAMPLES[1].to_dict(), "device": "cpu"}
    event = event_from_dict(data)
    assert isinstance(event, ModelLoad) and event.extra == {"device": "cpu"}
    assert event.to_dict() == data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (["run_start"], "an event is a JSON object, got list"),
        ({"seq": 1}, "unknown event type None"),
        ({"type": "tool_progress", "seq": 1}, "unknown event type 'tool_progress'"),
        ({"type": "final", "seq": 1, "status": "final"}, "a final event needs answer, answered"),
        ({"type": "model_load", "model": "m"}, "a model_load event needs duration_s"),
        ({"type": "model_load", "model": "m", "duration_s": 1, "seq": "7"}, "seq must be a number"),
    ],
)
def test_a_malformed_event_dict_is_a_clear_error(data, message):
    with pytest.raises(EventError, match=message) as caught:
        event_from_dict(data)
    assert isinstance(caught.value, LokalError) and isinstance(caught.value, ValueError)


@tool
def lookup(n: int) -> str:
    """A record.

    Args:
        n: which record.
    """
    if n == 99:
        raise ValueError("no such record")
    return f"record {n}"


def traced_run(tmp_path, name, profile, registry, backend=None, **settings):
    """A run with a trace file and a subscriber; (result, trace lines, events seen)."""
    agent = Agent(profile, registry, backend=backend, settings=AgentSettings(**settings))
    path = tmp_path / f"{name}.jsonl"
    trace = JsonlTrace(path)
    seen: list[RunEvent] = []
    agent.subscribe(trace)
    agent.subscribe(seen.append)
    try:
        result = agent.run("Read the intro and look the records up")
    finally:
        trace.close()
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return result, lines, seen


def test_a_real_run_writes_todays_trace_shape_and_gives_subscribers_typed_events(
    tmp_path, monkeypatch
):
    import lokal.llm.select

    # a fresh tool selector: this process has not loaded the preselection's embeddings yet
    monkeypatch.setattr(lokal.llm.select, "_DEFAULT", None)
    mock = load_profile(MODEL_CONFIG, "mock")
    builtin = ToolRegistry()
    register_builtin_tools(builtin, Workspace(DATA / "workspace"))
    scripted = mock.with_tool_calling(max_retries=0)
    runs = [
        # the mock model with the built-in tools, loading its backend (model_load)
        traced_run(tmp_path, "mock", mock, builtin),
        # a fresh call, a failing one and a reused one, then the same call a third time
        traced_run(
            tmp_path,
            "repeat",
            scripted,
            ToolRegistry([lookup]),
            ScriptedBackend(
                [
                    envelope([("lookup", {"n": 1})]),
                    envelope([("lookup", {"n": 1}), ("lookup", {"n": 99})]),
                    envelope([("lookup", {"n": 1})]),
                    envelope(content="Done."),
                ]
            ),
        ),
        traced_run(
            tmp_path,
            "max",
            scripted,
            ToolRegistry([lookup]),
            ScriptedBackend([envelope([("lookup", {"n": 2})]), envelope(content="Done.")]),
            max_iterations=1,
        ),
        traced_run(
            tmp_path,
            "budget",
            scripted,
            ToolRegistry([lookup]),
            ScriptedBackend([]),
            time_budget_s=1e-9,
        ),
    ]
    shapes: dict[str, set[tuple[str, ...]]] = {}
    for result, lines, seen in runs:
        # subscribers get the typed events, the very objects the result holds
        assert all(isinstance(e, RunEvent) for e in seen)
        assert len(seen) == len(result.events)
        assert all(a is b for a, b in zip(seen, result.events, strict=True))
        # the trace writes each event's to_dict(), and reads back into the same event
        assert lines == [json.loads(json.dumps(e.to_dict(), default=str)) for e in seen]
        for line, event in zip(lines, seen, strict=True):
            assert event_from_dict(line) == event
            assert type(event) in EVENT_CLASSES and line["type"] == event.type
            shapes.setdefault(line["type"], set()).add(tuple(line))
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
        assert isinstance(seen[0], RunStart) and isinstance(seen[-1], Final)
    # the mock loads no chat model; the embeddings of tool preselection load once, as a
    # step of their own right after run_start
    first = runs[0][2]
    assert isinstance(first[1], ModelLoad) and isinstance(first[2], DecisionStart)
    assert first[1].component == "embeddings"
    assert sum(isinstance(e, ToolStart) for e in first) >= 1
    for kind, keys in shapes.items():
        assert keys <= EXPECTED_KEYS[kind], kind
    # every variant was seen, but a chat model's load (no mock run has one: test_run_e2e)
    chat_load = (*STAMPS, "model", "duration_s")
    expected = {**EXPECTED_KEYS, "model_load": EXPECTED_KEYS["model_load"] - {chat_load}}
    assert shapes == expected
