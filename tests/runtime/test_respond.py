"""``Agent.respond``: one turn of the agent loop for a conversation a client holds (what
``lokal serve`` runs every request through), with the scripted test double."""

from __future__ import annotations

import pytest

from helpers import MODEL_CONFIG, envelope
from lokal.config import load_profile
from lokal.events import Final, Guard, ToolEnd
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.runtime import Agent, AgentSettings, ClientTurn
from lokal.tools.registry import ToolRegistry, tool

QUESTION = [{"role": "user", "content": "What is the weather in Paris, and key a?"}]

runs: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    raise AssertionError("a client's tool is never run by the loop")


WEATHER = {"type": "function", "function": get_weather.to_flat()}  # as a client sends it


@tool
def lookup(key: str) -> dict:
    """The stored value of a key.

    Args:
        key: which value.
    """
    runs.append(key)
    return {"key": key, "value": 42}


@pytest.fixture
def agent_with():
    runs.clear()
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=0)

    def make(replies: list[str], **settings) -> tuple[Agent, ScriptedBackend]:
        backend = ScriptedBackend(replies)
        agent = Agent(
            profile,
            ToolRegistry([lookup]),
            settings=AgentSettings(**settings),
            backend=backend,
        )
        return agent, backend

    return make


def offered(request) -> set[str]:
    return {t["function"]["name"] for t in request.tools or []}


def test_a_reply_calling_a_client_tool_ends_the_turn_after_the_servers_calls_ran(agent_with):
    agent, backend = agent_with(
        [envelope([("lookup", {"key": "a"}), ("get_weather", {"city": "Paris"})])]
    )
    result = agent.respond(QUESTION, ClientTurn([WEATHER]))
    assert result.status == "tool_calls" and runs == ["a"]
    (call,) = result.decision.ai_message["tool_calls"]
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"}
    assert result.decision.parse["server_tools"] == [
        {"name": "lookup", "args": {"key": "a"}, "status": "success"}
    ]
    assert offered(backend.requests[0]) == {"get_weather", "lookup"}


def test_the_servers_results_are_decided_on_and_the_turns_tokens_add_up(agent_with):
    agent, backend = agent_with([envelope([("lookup", {"key": "a"})]), envelope(content="42.")])
    result = agent.respond(QUESTION, ClientTurn([WEATHER]))
    assert result.status == "final" and result.decision.ai_message["content"] == "42."
    second = backend.requests[1].conversation
    assert second[-1]["role"] == "tool" and '"value": 42' in second[-1]["content"]
    assert len(backend.requests) == 2
    decided = [e for e in result.events if type(e).__name__ == "DecisionMade"]
    assert result.decision.usage.completion_tokens == sum(
        e.usage["completion_tokens"] for e in decided
    )
    assert result.decision.usage.completion_tokens > decided[-1].usage["completion_tokens"] > 0
    # the client's messages are not changed
    assert QUESTION == [{"role": "user", "content": "What is the weather in Paris, and key a?"}]


def test_an_identical_server_call_is_not_run_again_and_the_repeat_limit_forces_an_answer(
    agent_with,
):
    same = envelope([("lookup", {"key": "a"})])
    agent, backend = agent_with([same, same, same, envelope(content="It is 42.")])
    result = agent.respond(QUESTION, ClientTurn([WEATHER]))
    assert runs == ["a"]  # the second identical call got the first one's result back
    reused = [e for e in result.events if isinstance(e, ToolEnd) and e.reused]
    assert len(reused) == 1
    assert any(isinstance(e, Guard) and e.guard == "repeated_call" for e in result.events)
    assert result.decision.ai_message["content"] == "It is 42."
    # the forced decision offers the client's tools only
    assert offered(backend.requests[-1]) == {"get_weather"}


def test_after_the_last_round_the_forced_decision_may_still_call_the_clients_tools(agent_with):
    replies = [envelope([("lookup", {"key": k})]) for k in "abc"]
    replies.append(envelope([("get_weather", {"city": "Paris"})]))
    agent, backend = agent_with(replies, max_iterations=3)
    result = agent.respond(QUESTION, ClientTurn([WEATHER], tool_choice="required"))
    assert runs == ["a", "b", "c"]
    assert any(isinstance(e, Guard) and e.guard == "max_iterations" for e in result.events)
    assert offered(backend.requests[-1]) == {"get_weather"}
    assert result.status == "tool_calls"
    assert result.decision.ai_message["tool_calls"][0]["name"] == "get_weather"


def test_an_unusable_decision_ends_the_turn_as_it_is(agent_with):
    agent, backend = agent_with(["{not json at all", envelope(content="never asked")])
    result = agent.respond(QUESTION, ClientTurn([WEATHER], tool_choice="required"))
    assert result.status == "decision_error" and not result.decision.ok
    assert backend.remaining == 1  # no forced decision: the client's choice is not dropped


def test_a_turn_out_of_time_gives_no_decision(agent_with):
    agent, _ = agent_with([envelope([("lookup", {"key": "a"})])] * 3, time_budget_s=0.0)
    result = agent.respond(QUESTION, ClientTurn([WEATHER]))
    assert result.status == "time_budget" and result.decision is None
    assert isinstance(result.events[-1], Final)


def test_a_client_tool_of_the_same_name_wins_over_the_registrys(agent_with):
    mine = {"type": "function", "function": {**lookup.to_flat(), "description": "Client's."}}
    agent, backend = agent_with([envelope([("lookup", {"key": "a"})])])
    result = agent.respond(QUESTION, ClientTurn([mine]))
    assert runs == [] and result.status == "tool_calls"
    assert [t["function"]["description"] for t in backend.requests[0].tools] == ["Client's."]
