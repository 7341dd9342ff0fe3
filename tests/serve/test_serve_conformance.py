"""Every tool_choice x stream x parallel_tool_calls combination through the official openai
SDK against a real ``lokal serve`` on loopback; a streamed reply rebuilt with the SDK's own
accumulator equals the non-streamed one."""

from __future__ import annotations

import json

import pytest
from serve_support import QUESTION, TOOLS, accumulate, calls_reply, shape

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

TWO_CALLS = calls_reply(("get_weather", {"city": "Paris"}), ("get_time", {"city": "Paris"}))

CHOICES = {
    "none": "none",
    "auto": "auto",
    "required": "required",
    "named": {"type": "function", "function": {"name": "get_time"}},
    "allowed_tools": {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "required",
            "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        },
    },
}

# the scripted replies for each choice, and the calls lokal must return (parallel allowed)
SCRIPTS = {
    # the model tries to call although tools are off: refused, retried, then it answers
    "none": ([TWO_CALLS, "It is sunny in Paris."], []),
    "auto": ([TWO_CALLS], ["get_weather", "get_time"]),
    # the model answers in prose although a call is required: refused, retried
    "required": (["It is probably sunny.", TWO_CALLS], ["get_weather", "get_time"]),
    "named": ([calls_reply(("get_time", {"city": "Paris"}))], ["get_time"]),
    "allowed_tools": ([calls_reply(("get_weather", {"city": "Paris"}))], ["get_weather"]),
}


def _ask(client, model, choice, stream, parallel):
    kwargs = {
        "model": model,
        "messages": QUESTION,
        "tools": TOOLS,
        "tool_choice": CHOICES[choice],
        "parallel_tool_calls": parallel,
    }
    if stream:
        return accumulate(
            client.chat.completions.create(
                stream=True, stream_options={"include_usage": True}, **kwargs
            ),
            TOOLS,
        )
    return client.chat.completions.create(**kwargs), None


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "single"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("choice", list(CHOICES))
def test_tool_choice_stream_parallel(serve, profile, choice, stream, parallel):
    replies, expected = SCRIPTS[choice]
    served = serve([*replies, *replies])  # once plain, once streamed
    client = served.client()
    if not parallel:
        expected = expected[:1]
    completion, chunks = _ask(client, profile.name, choice, stream, parallel)
    message = completion.choices[0].message
    assert [c.function.name for c in message.tool_calls or []] == expected
    if expected:
        assert message.content is None
        assert completion.choices[0].finish_reason == "tool_calls"
        for call in message.tool_calls:
            assert call.id.startswith("call_") and call.type == "function"
            assert json.loads(call.function.arguments) == {"city": "Paris"}
    else:
        assert message.content == "It is sunny in Paris."
        assert completion.choices[0].finish_reason == "stop"
    # what the model was offered follows tool_choice
    offered = served.backend.requests[0]
    names = [t["function"]["name"] for t in offered.tools or []]
    if choice == "none":
        assert names == [] and offered.purpose == "final"
    elif choice == "named":
        assert names == ["get_time"]
    elif choice == "allowed_tools":
        assert names == ["get_weather"]
    else:
        assert names == ["get_weather", "get_time"]
    if stream:
        assert chunks[-1].usage is not None and chunks[-1].choices == []
        plain, _ = _ask(client, profile.name, choice, False, parallel)
        assert shape(completion) == shape(plain)
    else:
        extra = completion.model_extra["lokal"]
        assert extra["status"] == "success"
        # where an answer came from (issue 20); a reply of calls has no answer source
        assert extra.get("answer_source") == (None if expected else "model")
        assert extra["attempts"] == (2 if choice in ("none", "required") else 1)
        if not parallel and choice in ("auto", "required"):
            assert [c["name"] for c in extra["dropped_calls"]] == ["get_time"]


def test_constrained_grammar_follows_tool_choice(serve, profile):
    """On a constrained profile the grammar itself enforces the choice: required has no
    answer branch, none has no call branch, parallel_tool_calls=false allows one call,
    response_format puts the schema on the answer."""
    constrained = profile.with_tool_calling(mode="constrained")
    answer = json.dumps({"content": "Fine."})
    one = calls_reply(("get_weather", {"city": "Paris"}))
    served = serve(
        [one, answer, one, json.dumps({"content": {"city": "Paris"}})], config=constrained
    )
    client = served.client()
    model = constrained.name
    client.chat.completions.create(
        model=model, messages=QUESTION, tools=TOOLS, tool_choice="required"
    )
    client.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS, tool_choice="none")
    client.chat.completions.create(
        model=model, messages=QUESTION, tools=TOOLS, parallel_tool_calls=False
    )
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    reply = client.chat.completions.create(
        model=model,
        messages=QUESTION,
        response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema}},
    )
    required, none, single, formatted = (r.response_schema for r in served.backend.requests)
    assert "anyOf" not in required and "tool_calls" in required["properties"]
    assert list(none["properties"]) == ["content"]
    assert single["anyOf"][0]["properties"]["tool_calls"]["maxItems"] == 1
    assert formatted["properties"]["content"]["required"] == ["city"]
    assert json.loads(reply.choices[0].message.content) == {"city": "Paris"}


def test_json_object_answer_checked_and_retried(serve, profile):
    served = serve(["Paris is sunny.", '{"city": "Paris", "sky": "sunny"}'])
    reply = served.client().chat.completions.create(
        model=profile.name, messages=QUESTION, response_format={"type": "json_object"}
    )
    assert json.loads(reply.choices[0].message.content) == {"city": "Paris", "sky": "sunny"}
    assert reply.model_extra["lokal"]["attempts"] == 2


def test_streamed_content_comes_as_generated(serve, profile):
    """Content deltas arrive as the backend reports tokens, before the decision ends."""
    from lokal.llm.backends import Completion
    from lokal.progress import report

    words = ["The ", "sky ", "is ", "blue ", "today."]

    def writing(request):
        for word in words:
            report(tokens=1, text=word)
        return Completion("".join(words), 10, len(words), "stop")

    served = serve([writing])
    stream = served.client().chat.completions.create(
        model=profile.name, messages=QUESTION, stream=True
    )
    completion, chunks = accumulate(stream)
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(deltas) >= 4  # word by word (trailing spaces are held until the next word)
    assert "".join(deltas) == completion.choices[0].message.content == "The sky is blue today."
