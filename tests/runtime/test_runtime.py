"""The agent loop with the scripted test double and real tools."""

import json
import time

import pytest

from helpers import DATA, MODEL_CONFIG, envelope
from lokal.config import load_profile
from lokal.events import DecisionMade, DecisionStart, Final, Guard, RunStart, ToolEnd, ToolStart
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.runtime import Agent, AgentSettings, JsonlTrace
from lokal.skills.agent_skills import SkillLibrary, skill_tools
from lokal.skills.builtin import register_builtin_tools
from lokal.skills.workspace import Workspace
from lokal.tools.registry import ToolRegistry, tool
from lokal.trace import read_trace

WORKSPACE = DATA / "workspace"


@pytest.fixture
def profile():
    return load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=0)


@pytest.fixture
def registry():
    reg = ToolRegistry()
    register_builtin_tools(reg, Workspace(WORKSPACE))

    @tool(timeout=0.5)
    def slow_tool(seconds: float) -> str:
        """Sleep, then say so.

        Args:
            seconds: how long to sleep.
        """
        time.sleep(seconds)
        return f"slept {seconds}"

    @tool
    def broken_tool(x: int) -> int:
        """Always fails.

        Args:
            x: ignored.
        """
        raise RuntimeError("the disk is on fire")

    reg.register(slow_tool)
    reg.register(broken_tool)
    return reg


def agent_with(profile, registry, replies, **settings):
    backend = ScriptedBackend(replies)
    agent = Agent(profile, registry, backend=backend, settings=AgentSettings(**settings))
    return agent, backend


def by_type(result, kind):
    """The run's events of one class (``lokal.events``)."""
    return [e for e in result.events if isinstance(e, kind)]


def test_no_tool_answer_ends_the_loop_at_once(profile, registry):
    agent, backend = agent_with(profile, registry, [envelope(content="Hello!")])
    result = agent.run("Say hello")
    assert (result.status, result.answer, result.iterations) == ("final", "Hello!", 1)
    # (the embedding model of tool preselection loads first, in the first run of a process)
    events = [e for e in result.events if e.type != "model_load"]
    assert [type(e) for e in events] == [RunStart, DecisionStart, DecisionMade, Final]
    assert [e.type for e in events] == ["run_start", "decision_start", "decision", "final"]
    assert backend.remaining == 0


def test_one_tool_then_an_answer(profile, registry):
    replies = [
        envelope([("calculator", {"expression": "3.14 * 5 - 2.5"})]),
        envelope(content="It is 13.2."),
    ]
    agent, backend = agent_with(profile, registry, replies)
    result = agent.run("What is 3.14 * 5 - 2.5?")
    assert result.answer == "It is 13.2."
    tool_message = result.messages[-2]
    assert tool_message["role"] == "tool" and tool_message["status"] == "success"
    assert json.loads(tool_message["content"])["output"]["result"] == pytest.approx(13.2)
    # the second decision saw the tool result
    assert any(m.get("role") == "tool" for m in backend.requests[1].conversation)


def test_three_tools_of_one_turn_run_in_parallel(profile, registry):
    calls = [
        ("slow_tool", {"seconds": 0.3}),
        ("slow_tool", {"seconds": 0.31}),
        ("slow_tool", {"seconds": 0.32}),
    ]
    agent, _ = agent_with(profile, registry, [envelope(calls), envelope(content="done")])
    result = agent.run("sleep three times")
    starts = by_type(result, ToolStart)
    ends = by_type(result, ToolEnd)
    assert len(starts) == len(ends) == 3
    # every call started before any call ended: their intervals overlap
    assert max(e.start_perf for e in starts) < min(e.end_perf for e in ends)
    # ToolMessages come back in call order
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert [json.loads(m["content"])["output"] for m in tool_messages] == [
        "slept 0.3",
        "slept 0.31",
        "slept 0.32",
    ]


def test_a_failing_tool_gives_an_error_message_and_the_loop_goes_on(profile, registry):
    replies = [envelope([("broken_tool", {"x": 1})]), envelope(content="The tool failed.")]
    agent, backend = agent_with(profile, registry, replies)
    result = agent.run("try it")
    assert result.status == "final"
    failed = next(m for m in result.messages if m["role"] == "tool")
    assert failed["status"] == "error"
    assert "RuntimeError: the disk is on fire" in json.loads(failed["content"])["error"]
    assert "These tools failed: broken_tool" in backend.requests[1].messages[-1]["content"]


def test_a_tool_that_times_out_yields_an_error_and_the_loop_goes_on(profile, registry):
    replies = [envelope([("slow_tool", {"seconds": 3})]), envelope(content="Too slow.")]
    agent, _ = agent_with(profile, registry, replies)
    started = time.perf_counter()
    result = agent.run("sleep long")
    assert result.status == "final"
    failed = next(m for m in result.messages if m["role"] == "tool")
    assert failed["status"] == "error" and "timed out" in json.loads(failed["content"])["error"]
    end = by_type(result, ToolEnd)[0]
    assert end.timed_out is True
    assert time.perf_counter() - started < 3  # the loop did not wait for the stuck tool


def test_iteration_cap_asks_for_a_final_answer_without_tools(profile, registry):
    replies = [envelope([("calculator", {"expression": f"{i}+1"})]) for i in range(3)]
    replies.append("Here is what I found: 1, 2 and 3.")
    agent, backend = agent_with(profile, registry, replies, max_iterations=3)
    result = agent.run("count")
    assert result.status == "max_iterations"
    assert result.answer == "Here is what I found: 1, 2 and 3."
    final_request = backend.requests[-1]
    assert final_request.purpose == "final" and final_request.tools is None
    assert [e.guard for e in by_type(result, Guard)] == ["max_iterations"]


def test_an_identical_successful_call_is_not_run_again(profile, registry):
    same = envelope([("calculator", {"expression": "2+2"})])
    agent, backend = agent_with(profile, registry, [same, same, envelope(content="It is 4.")])
    result = agent.run("2+2?")
    assert result.status == "final" and result.answer == "It is 4." and result.answered
    ends = by_type(result, ToolEnd)
    assert [e.reused for e in ends] == [False, True]
    # the trace says reused only for the result given back
    assert [e.to_dict().get("reused", False) for e in ends] == [False, True]
    repeat = [m for m in result.messages if m["role"] == "tool"][1]
    output = json.loads(repeat["content"])["output"]
    assert output["repeated_call"] is True and output["earlier_result"]["result"] == 4
    assert "Answer from it" in output["note"]
    assert backend.remaining == 0
    # call ids go on counting through the run, so each ToolMessage answers one call
    ids = [c["id"] for m in result.messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert ids == ["call_001", "call_002"]
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == ids


def test_the_same_call_three_times_ends_with_a_forced_final_answer(profile, registry):
    same = envelope([("calculator", {"expression": "2+2"})])
    agent, backend = agent_with(profile, registry, [same, same, same, "The answer is 4."])
    result = agent.run("2+2?")
    assert result.status == "repeated_call" and result.answered
    assert result.source == "forced" and result.trusted  # the guard is in the stop reason
    assert result.answer == "The answer is 4."
    assert "3 times" in result.stop_reason
    assert backend.requests[-1].purpose == "final" and backend.requests[-1].tools is None
    assert len([e for e in by_type(result, ToolEnd) if not e.reused]) == 1
    assert [e.guard for e in by_type(result, Guard)] == ["repeated_call"]


def test_a_decision_that_stays_unusable_ends_with_a_forced_final_answer(profile, registry):
    unknown = envelope([("web_search", {"q": "x"})])
    agent, backend = agent_with(profile, registry, [unknown, "I cannot search the web."])
    result = agent.run("search the web")
    assert result.status == "decision_error" and result.answered
    assert result.answer == "I cannot search the web."
    assert backend.requests[-1].purpose == "final"


def test_when_even_the_forced_answer_fails_the_tool_result_is_extracted(profile, registry):
    calc = envelope([("calculator", {"expression": "6*7"})])
    unknown = envelope([("web_search", {"q": "x"})])
    agent, _ = agent_with(profile, registry, [calc, unknown, unknown])
    result = agent.run("6*7 and then search")
    # the model never answered: the passage of the result that answers is the answer,
    # marked as extracted (not "the model answered"), and the run still counts as answered
    assert result.status == "decision_error" and not result.answered
    assert result.source == "extracted" and result.trusted
    assert result.answer == "result: 42\n\n(quoted from calculator)"
    assert "lokal quoted the tool result" in result.stop_reason
    assert result.to_dict()["source"] == "extracted"
    # the answer ends the history once (it was there twice)
    assert [m["content"] for m in result.messages[-2:]] != [result.answer, result.answer]
    assert result.messages[-1] == {"role": "assistant", "content": result.answer, "tool_calls": []}


def test_with_no_result_to_extract_from_the_run_says_it_has_no_answer(profile, registry):
    search = envelope([("local_file_search", {"query": "zebra", "folder": "no/such/folder"})])
    unknown = envelope([("web_search", {"q": "x"})])
    agent, _ = agent_with(profile, registry, [search, unknown, unknown])
    result = agent.run("find zebra and then search")
    assert result.status == "decision_error" and not result.answered
    assert result.source == "none" and not result.trusted
    assert result.answer.startswith("No final answer:")
    assert result.answer.endswith("No tool result was obtained.")


def test_plan_and_execute_runs_the_plan_then_answers(profile, registry):
    plan = json.dumps(
        {
            "reasoning": "read then compute",
            "plan": [
                {
                    "step": 1,
                    "description": "read",
                    "tool_call": {"name": "file_reader", "args": {"path": "docs/agent_intro.txt"}},
                },
                {
                    "step": 2,
                    "description": "calc",
                    "tool_call": {"name": "calculator", "args": {"expression": "2 + 2"}},
                },
            ],
        }
    )
    agent, _ = agent_with(
        profile, registry, [plan, envelope(content="Done: 4.")], strategy="plan_execute"
    )
    result = agent.run("read and compute")
    assert result.status == "final" and result.answer == "Done: 4."
    decisions = by_type(result, DecisionMade)
    assert [d.purpose for d in decisions] == ["plan", "step"]
    assert decisions[0].parse["plan"]["total_steps"] == 2
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert [m["name"] for m in tool_messages] == ["file_reader", "calculator"]


def test_time_budget_stops_the_loop(profile, registry):
    replies = [envelope([("slow_tool", {"seconds": 0.3})]), envelope(content="never")]
    agent, _ = agent_with(profile, registry, replies, time_budget_s=0.1)
    result = agent.run("sleep")
    assert result.status == "time_budget"


def test_trace_file_holds_every_event(profile, registry, tmp_path):
    replies = [envelope([("calculator", {"expression": "1+1"})]), envelope(content="2")]
    agent, _ = agent_with(profile, registry, replies)
    trace = JsonlTrace(tmp_path / "trace.jsonl")
    agent.subscribe(trace)
    result = agent.run("1+1")
    trace.close()
    lines = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in lines] == [e.seq for e in result.events]
    # each line is the event's to_dict(), as JSON
    assert lines == [json.loads(json.dumps(e.to_dict(), default=str)) for e in result.events]
    decision = next(e for e in read_trace(tmp_path / "trace.jsonl") if e["type"] == "decision")
    assert decision["prompt"][0]["role"] == "system" and decision["raw_text"]


def test_weather_skill_in_three_rounds(profile):
    """The skill flow: read_skill → code_execution (a real sandboxed script) → answer."""
    library = SkillLibrary(DATA / "skills")
    registry = ToolRegistry()
    for item in skill_tools(library):
        registry.register(item)
    replies = [
        envelope([("read_skill", {"skill_name": "weather-forecast"})]),
        envelope(
            [
                (
                    "code_execution",
                    {
                        "command": "python scripts/weather_helper.py current --location Beijing",
                        "skill_name": "weather-forecast",
                    },
                )
            ]
        ),
        lambda request: envelope(
            content="Beijing now: "
            + json.loads(request.conversation[-1]["content"])["output"]["stdout"].strip()
        ),
    ]
    backend = ScriptedBackend(replies)
    system = library.catalog_text()
    agent = Agent(profile, registry, backend=backend, system_prompt=system)
    result = agent.run("What's the weather in Beijing?")
    assert result.status == "final" and result.iterations == 3
    assert [e.name for e in by_type(result, ToolEnd)] == ["read_skill", "code_execution"]
    # code_execution is visible from the first prompt on (an earlier agent's bug was hiding it)
    first_prompt = backend.requests[0].messages[0]["content"]
    assert "code_execution" in first_prompt and "weather-forecast" in first_prompt
    # after read_skill, the reminder says scripts run through code_execution
    assert "code_execution" in backend.requests[1].messages[-1]["content"]
    assert "Beijing" in result.answer and '"location"' in result.answer


def test_weather_skill_in_two_rounds_through_its_command_tool(profile):
    """The README's skill example as a small model can do it: the skill's documented command
    is a tool of its own, so one call runs the script and the answer holds its weather."""
    library = SkillLibrary(DATA / "skills")
    registry = ToolRegistry(skill_tools(library))
    backend = ScriptedBackend(
        [
            envelope([("weather_forecast_current", {"location": "Beijing"})]),
            envelope(content="It is sunny in Beijing, 15 °C."),
        ]
    )
    agent = Agent(profile, registry, backend=backend, system_prompt=library.catalog_text())
    result = agent.run("What's the weather in Beijing?")
    (end,) = by_type(result, ToolEnd)
    assert end.name == "weather_forecast_current" and end.status == "success"
    output = json.loads(result.messages[-2]["content"])["output"]
    assert output["condition"] == "Sunny" and output["temperature_c"] == 15
    assert result.status == "final" and result.source == "model" and result.trusted
    assert result.answer == "It is sunny in Beijing, 15 °C."


def test_a_tool_withdrawn_during_the_run_is_no_longer_offered(profile, registry):
    """A tool removed from the registry mid-run (an MCP server that died) leaves the next
    decision's tools; the others stay."""
    replies = [envelope([("calculator", {"expression": "1 + 1"})]), envelope(content="2.")]
    agent, backend = agent_with(profile, registry, replies)
    agent.subscribe(
        lambda event: registry.unregister("slow_tool") if isinstance(event, ToolEnd) else None
    )
    agent.run("1 + 1?")

    def offered(request):
        return {t["function"]["name"] for t in request.tools or []}

    first, second = backend.requests
    assert "slow_tool" in offered(first)
    assert "slow_tool" not in offered(second) and "calculator" in offered(second)


def test_an_answer_that_copies_the_tool_result_is_quoted(profile, registry):
    calc = envelope([("calculator", {"expression": "6*7"})])
    agent, _ = agent_with(profile, registry, [calc, envelope(content="result: 42")])
    result = agent.run("What is 6*7?")
    assert result.status == "final" and result.source == "quoted" and result.answered
    assert result.stop_reason == "the model answered, quoting the tool results"
