"""Every ``tool_choice`` of the Responses and the Anthropic Messages APIs, streamed and not:
the streamed reply rebuilt by the official SDK's stream helper equals the plain one; and a
reply that breaks the choice never reaches the client (ollama#17921: ``tool_choice`` ignored
under both the OpenAI and the Anthropic API). Decisions are scripted."""

from __future__ import annotations

import json

import anthropic
import pytest
from serve_support import KEY, calls_reply

MODEL = "smollm2-135m-free"
CALL = calls_reply(("get_weather", {"city": "Paris"}))
TEXT = "It is sunny."
FUNCTION = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
TOOL = {
    "name": FUNCTION["name"],
    "description": FUNCTION["description"],
    "input_schema": FUNCTION["parameters"],
}
ASK = "What is the weather in Paris?"

RESPONSES_CHOICES = [
    ("auto", CALL),
    ("none", TEXT),
    ("required", CALL),
    ({"type": "function", "name": "get_weather"}, CALL),
    (
        {
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "function", "name": "get_weather"}],
        },
        CALL,
    ),
]
MESSAGES_CHOICES = [
    ({"type": "auto"}, CALL),
    ({"type": "none"}, TEXT),
    ({"type": "any"}, CALL),
    ({"type": "tool", "name": "get_weather"}, CALL),
]


def responses_shape(response) -> list:
    return [
        (item.type, item.content[0].text)
        if item.type == "message"
        else (item.type, item.name, json.loads(item.arguments))
        for item in response.output
    ]


def messages_shape(message) -> tuple:
    blocks = [
        (b.type, b.text) if b.type == "text" else (b.type, b.name, b.input) for b in message.content
    ]
    return blocks, message.stop_reason


@pytest.mark.parametrize(("choice", "reply"), RESPONSES_CHOICES)
def test_responses_tool_choice_streamed_equals_plain(serve, choice, reply):
    served = serve([reply, reply])
    client = served.client()
    plain = client.responses.create(model=MODEL, input=ASK, tools=[FUNCTION], tool_choice=choice)
    with client.responses.stream(
        model=MODEL, input=ASK, tools=[FUNCTION], tool_choice=choice
    ) as stream:
        streamed = stream.get_final_response()
    assert responses_shape(streamed) == responses_shape(plain)
    kinds = {item.type for item in plain.output}
    assert kinds == ({"message"} if choice == "none" else {"function_call"})


@pytest.mark.parametrize(("choice", "reply"), MESSAGES_CHOICES)
def test_messages_tool_choice_streamed_equals_plain(serve, choice, reply):
    served = serve([reply, reply])
    sdk = anthropic.Anthropic(base_url=served.base, api_key=KEY, max_retries=0, timeout=20)
    ask = [{"role": "user", "content": ASK}]
    plain = sdk.messages.create(
        model=MODEL, max_tokens=64, messages=ask, tools=[TOOL], tool_choice=choice
    )
    with sdk.messages.stream(
        model=MODEL, max_tokens=64, messages=ask, tools=[TOOL], tool_choice=choice
    ) as stream:
        streamed = stream.get_final_message()
    assert messages_shape(streamed) == messages_shape(plain)
    assert plain.stop_reason == ("end_turn" if choice["type"] == "none" else "tool_use")


def test_a_call_under_tool_choice_none_never_reaches_the_client_of_either_api(serve):
    """ollama#17921: a call the model makes although ``tool_choice`` is none is not given to
    the client: it is retried, and the answer comes instead."""
    served = serve([CALL, TEXT, CALL, TEXT])
    response = served.client().responses.create(
        model=MODEL, input=ASK, tools=[FUNCTION], tool_choice="none"
    )
    assert [item.type for item in response.output] == ["message"]
    assert response.output_text == TEXT
    sdk = anthropic.Anthropic(base_url=served.base, api_key=KEY, max_retries=0, timeout=20)
    message = sdk.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": ASK}],
        tools=[TOOL],
        tool_choice={"type": "none"},
    )
    assert [b.type for b in message.content] == ["text"] and message.content[0].text == TEXT
    assert served.backend.remaining == 0  # each API's first reply (a call) was refused


def test_a_named_tool_is_the_one_called_under_both_apis(serve):
    """``tool_choice`` naming a tool: a call of another tool is refused (retried)."""
    other = calls_reply(("get_time", {"city": "Paris"}))
    served = serve([other, CALL, other, CALL])
    time_tool = {**FUNCTION, "name": "get_time", "description": "The time in a city."}
    response = served.client().responses.create(
        model=MODEL,
        input=ASK,
        tools=[FUNCTION, time_tool],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    assert [item.name for item in response.output] == ["get_weather"]
    sdk = anthropic.Anthropic(base_url=served.base, api_key=KEY, max_retries=0, timeout=20)
    anthropic_time = {**TOOL, "name": "get_time"}
    message = sdk.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": ASK}],
        tools=[TOOL, anthropic_time],
        tool_choice={"type": "tool", "name": "get_weather"},
    )
    assert [b.name for b in message.content if b.type == "tool_use"] == ["get_weather"]
