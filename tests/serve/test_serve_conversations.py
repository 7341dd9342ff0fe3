"""Issue 19: a served conversation reloads as it happened (``lokal serve --conversations``,
then ``lokal run --conversation``), and what every request uses loads at server start."""

from __future__ import annotations

import json

import numpy as np
import pytest
from serve_support import QUESTION, TOOLS, Served, calls_reply

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.events import RunStart
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.memory.conversations import ConversationStore
from lokal.memory.store import Memory
from lokal.runtime import Agent
from lokal.serve.app import create_app
from lokal.tools.registry import ToolRegistry

# starts an HTTP server in the test process: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

MODEL = "smollm2-135m-free"  # the profile tests/serve/conftest.py serves
NAME = "trip"


def test_a_served_conversation_reloads_with_the_clients_call_ids_and_tool_results(
    serve, profile, tmp_path
):
    db = tmp_path / "lokal.db"
    store = ConversationStore(db)
    served = serve(
        [
            calls_reply(("get_weather", {"city": "Paris"}), ("get_time", {"city": "Paris"})),
            "Sunny, and it is noon.",
            "You are welcome.",
        ],
        conversations=store,
    )
    client = served.client()
    header = {"X-Lokal-Conversation": NAME}

    # turn 1: the model calls two tools; the client runs them and sends the results back
    # with the whole conversation, as OpenAI clients do
    first = client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=TOOLS, extra_headers=header
    )
    calls = first.choices[0].message.tool_calls
    seen_ids = [call.id for call in calls]
    assert len(seen_ids) == 2 and all(i.startswith("call_") and len(i) > 10 for i in seen_ids)
    results = {"get_weather": {"sky": "sunny"}, "get_time": {"time": "12:00"}}
    messages = [
        *QUESTION,
        first.choices[0].message.model_dump(exclude_none=True),
        *(
            {
                "role": "tool",
                "tool_call_id": call.id,
                "content": json.dumps(results[call.function.name]),
            }
            for call in calls
        ),
    ]
    second = client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, extra_headers=header
    )
    assert second.choices[0].message.content == "Sunny, and it is noon."
    # turn 2: a new question after the whole conversation again
    messages += [
        second.choices[0].message.model_dump(exclude_none=True),
        {"role": "user", "content": "Thanks!"},
    ]
    third = client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, extra_headers=header
    )
    assert third.choices[0].message.content == "You are welcome."
    store.close()

    # loaded as `lokal run --conversation trip` loads it (lokal.cli.run: Memory.history)
    memory = Memory(conversation=NAME, db_path=db, memory_dir=tmp_path / "memory")
    history = memory.history()
    assert history.repairs == []
    roles = ["user", "assistant", "tool", "tool", "assistant", "user", "assistant"]
    assert [m["role"] for m in history] == roles  # nothing stored twice
    assert [c["id"] for c in history[1]["tool_calls"]] == seen_ids
    assert [m["tool_call_id"] for m in history[2:4]] == seen_ids
    assert [json.loads(m["content"]) for m in history[2:4]] == list(results.values())
    assert [m["name"] for m in history[2:4]] == ["get_weather", "get_time"]
    assert history[4]["content"] == "Sunny, and it is noon." and history[5]["content"] == "Thanks!"

    # ... and the next run continues it without repairing anything
    backend = ScriptedBackend(["Bye."])
    agent = Agent(profile, ToolRegistry(), backend=backend)
    memory.attach(agent)
    result = agent.run("Bye!", history=history)
    memory.close()
    start = result.events[0]
    assert isinstance(start, RunStart) and start.history_repairs == []
    sent = backend.requests[0].conversation
    turn = next(m for m in sent if m.get("tool_calls"))  # what the model is given
    assert [c["id"] for c in turn["tool_calls"]] == seen_ids


class _FakeMiniLM:
    """Stands in for the local MiniLM: counts how often it is loaded."""

    loads = 0
    name, dim = "fake", 4

    def __init__(self) -> None:
        type(self).loads += 1

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.array([[len(t) % 7 + 1.0, 1.0, t.count(" ") + 1.0, 1.0] for t in texts])
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def fresh_selector(monkeypatch):
    """A tool selector not loaded yet, whose embedding model is ``_FakeMiniLM``."""
    import lokal.llm.select
    import lokal.rag.embeddings

    monkeypatch.setattr(lokal.llm.select, "_DEFAULT", None)
    monkeypatch.setattr(lokal.rag.embeddings, "LocalEmbedder", _FakeMiniLM)
    monkeypatch.setattr(_FakeMiniLM, "loads", 0)
    return lokal.llm.select


def test_the_tool_ranking_embedder_loads_at_server_start(fresh_selector):
    profile = load_profile(MODEL_CONFIG, MODEL).with_tool_calling(preselect_k=1)
    log: list[dict] = []
    backend = ScriptedBackend([calls_reply(("get_weather", {"city": "Paris"}))])
    served = Served(create_app(profile, backend=backend, log=log.append), log, lifespan="on")
    try:
        # started: loaded before any request, and said so in the log
        assert fresh_selector.default_selector().loaded and _FakeMiniLM.loads == 1
        (entry,) = log
        assert entry["event"] == "model_load" and entry["component"] == "embeddings"
        assert entry["dense"] is True and entry["profiles"] == [MODEL]
        reply = served.client().chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS)
        assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
        assert _FakeMiniLM.loads == 1  # the request did not load it again
        assert len(backend.requests[0].tools) == 1  # it ranked the tools: one offered
    finally:
        served.stop()


def test_nothing_loads_at_start_for_profiles_that_do_not_rank_tools(fresh_selector):
    profile = load_profile(MODEL_CONFIG, MODEL).with_tool_calling(preselect_k=None)
    log: list[dict] = []
    served = Served(create_app(profile, backend=ScriptedBackend(), log=log.append), log, "on")
    try:
        assert log == [] and _FakeMiniLM.loads == 0
        assert fresh_selector._DEFAULT is None or not fresh_selector._DEFAULT.loaded
    finally:
        served.stop()
