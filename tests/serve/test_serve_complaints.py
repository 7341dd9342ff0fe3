"""Each complaint quoted in issue 12 about another local server, as a test lokal serve
passes (official openai SDK, real server on loopback, scripted model)."""

from __future__ import annotations

import json

import pytest
from serve_support import PING, QUESTION, TOOLS, WEATHER, accumulate, calls_reply, hermes

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow


def test_ollama_11185_tool_calls_are_not_returned_as_content(serve, profile):
    """The model writes a Hermes <tool_call> block: the client gets a tool call, not text."""
    reply = hermes(("get_weather", {"city": "Paris"}))
    served = serve([reply, reply])
    client = served.client()
    plain = client.chat.completions.create(model=profile.name, messages=QUESTION, tools=TOOLS)
    message = plain.choices[0].message
    assert message.content is None
    assert [c.function.name for c in message.tool_calls] == ["get_weather"]
    streamed, chunks = accumulate(
        client.chat.completions.create(
            model=profile.name, messages=QUESTION, tools=TOOLS, stream=True
        ),
        TOOLS,
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "tool_call" not in text and text == ""
    assert [c.function.name for c in streamed.choices[0].message.tool_calls] == ["get_weather"]


def test_ollama_8421_17921_tool_choice_is_not_ignored(serve, profile):
    """tool_choice none: no call comes back and no tool is offered; a named function: only
    that tool is offered and it is called."""
    served = serve(
        [
            calls_reply(("get_weather", {"city": "Paris"})),
            "Sunny.",
            hermes(("get_time", {"city": "Paris"})),
        ]
    )
    client = served.client()
    none = client.chat.completions.create(
        model=profile.name, messages=QUESTION, tools=TOOLS, tool_choice="none"
    )
    assert none.choices[0].message.tool_calls is None
    assert none.choices[0].message.content == "Sunny."
    named = client.chat.completions.create(
        model=profile.name,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    assert [c.function.name for c in named.choices[0].message.tool_calls] == ["get_time"]
    assert served.backend.requests[0].tools is None
    assert [t["function"]["name"] for t in served.backend.requests[2].tools] == ["get_time"]


def test_llamacpp_14101_second_parallel_call_is_not_left_in_content(serve, profile):
    reply = hermes(("get_weather", {"city": "Paris"}), ("get_time", {"city": "Paris"}))
    served = serve([reply])
    message = (
        served.client()
        .chat.completions.create(model=profile.name, messages=QUESTION, tools=TOOLS)
        .choices[0]
        .message
    )
    assert message.content is None
    assert [c.function.name for c in message.tool_calls] == ["get_weather", "get_time"]


def test_llamacpp_18591_streamed_calls_have_their_own_index(serve, profile):
    served = serve(
        [calls_reply(("get_weather", {"city": "Paris"}), ("get_time", {"city": "Paris"}))]
    )
    stream = served.client().chat.completions.create(
        model=profile.name, messages=QUESTION, tools=TOOLS, stream=True
    )
    completion, chunks = accumulate(stream, TOOLS)
    firsts = [
        (d.index, d.id, d.function.name)
        for c in chunks
        if c.choices
        for d in c.choices[0].delta.tool_calls or []
        if d.id
    ]
    assert [index for index, _, _ in firsts] == [0, 1]
    assert len({ident for _, ident, _ in firsts}) == 2
    assert [c.function.name for c in completion.choices[0].message.tool_calls] == [
        "get_weather",
        "get_time",
    ]


def test_llamacpp_27217_required_is_enforced(serve, profile):
    """The model answers in prose: with tool_choice required it is told so and calls."""
    served = serve(["I cannot check that.", calls_reply(("get_weather", {"city": "Paris"}))])
    reply = served.client().chat.completions.create(
        model=profile.name, messages=QUESTION, tools=TOOLS, tool_choice="required"
    )
    assert [c.function.name for c in reply.choices[0].message.tool_calls] == ["get_weather"]
    assert "a tool call is required" in served.backend.requests[1].messages[-1]["content"]


def test_llamacpp_27217_required_without_a_call_is_an_error_not_an_answer(serve, profile):
    served = serve(["No.", "Still no."])
    client = served.client()
    try:
        client.chat.completions.create(
            model=profile.name, messages=QUESTION, tools=TOOLS, tool_choice="required"
        )
    except Exception as exc:  # openai.InternalServerError
        assert getattr(exc, "status_code", None) == 500
        assert "a tool call is required" in str(exc)
    else:
        raise AssertionError("a reply without a call was returned for tool_choice required")


def test_llama_cpp_python_1883_stream_with_tools_works(serve, profile):
    served = serve(["It is sunny.", calls_reply(("get_weather", {"city": "Paris"}))])
    client = served.client()
    answer, _ = accumulate(
        client.chat.completions.create(
            model=profile.name, messages=QUESTION, tools=TOOLS, stream=True
        ),
        TOOLS,
    )
    assert answer.choices[0].message.content == "It is sunny."
    call, _ = accumulate(
        client.chat.completions.create(
            model=profile.name, messages=QUESTION, tools=TOOLS, stream=True
        ),
        TOOLS,
    )
    assert call.choices[0].message.tool_calls[0].function.name == "get_weather"


def test_vllm_9693_streamed_arguments_are_never_none(serve, profile):
    served = serve([calls_reply(("get_weather", {"city": "Paris"}))])
    stream = served.client().chat.completions.create(
        model=profile.name, messages=QUESTION, tools=TOOLS, stream=True
    )
    completion, chunks = accumulate(stream, TOOLS)
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert deltas and all(isinstance(d.function.arguments, str) for d in deltas)
    arguments = completion.choices[0].message.tool_calls[0].function.arguments
    assert json.loads(arguments) == {"city": "Paris"}


def test_vllm_28806_empty_arguments_of_a_parameterless_tool_are_kept(serve, profile):
    reply = calls_reply(("ping", {}))
    served = serve([reply, reply])
    client = served.client()
    plain = client.chat.completions.create(
        model=profile.name, messages=[{"role": "user", "content": "ping"}], tools=[PING]
    )
    assert plain.choices[0].message.tool_calls[0].function.arguments == "{}"
    streamed, _ = accumulate(
        client.chat.completions.create(
            model=profile.name,
            messages=[{"role": "user", "content": "ping"}],
            tools=[PING],
            stream=True,
        ),
        [PING],
    )
    assert streamed.choices[0].message.tool_calls[0].function.arguments == "{}"


def test_finish_reason_is_tool_calls_for_a_tool_call(serve, profile):
    reply = calls_reply(("get_weather", {"city": "Paris"}))
    served = serve([reply, reply])
    client = served.client()
    plain = client.chat.completions.create(model=profile.name, messages=QUESTION, tools=[WEATHER])
    assert plain.choices[0].finish_reason == "tool_calls"
    stream = client.chat.completions.create(
        model=profile.name, messages=QUESTION, tools=[WEATHER], stream=True
    )
    finishes = [
        c.choices[0].finish_reason for c in stream if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["tool_calls"]
