"""``/v1/responses`` driven by the official openai SDK (``client.responses``) against a real
server on loopback; the decisions are scripted (ScriptedBackend)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from serve_support import KEY, calls_reply

MODEL = "smollm2-135m-free"  # the profile tests/serve/conftest.py serves
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def test_text_input_and_instructions_give_a_completed_response(serve):
    served = serve(["It is sunny in Paris."])
    response = served.client().responses.create(
        model=MODEL, input="What is the weather in Paris?", instructions="Be brief."
    )
    assert response.status == "completed" and response.object == "response"
    assert response.output_text == "It is sunny in Paris."
    assert response.usage.output_tokens > 0
    prompt = served.backend.requests[0].conversation
    assert prompt[0]["role"] == "system" and "Be brief." in prompt[0]["content"]


def test_a_call_round_trip_with_function_call_output_items(serve):
    served = serve([calls_reply(("get_weather", {"city": "Paris"})), "Sunny, 21 C."])
    client = served.client()
    first = client.responses.create(
        model=MODEL, input="What is the weather in Paris?", tools=[WEATHER], store=False
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    items = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"},
    ]
    second = client.responses.create(model=MODEL, input=items, tools=[WEATHER], store=False)
    assert second.output_text == "Sunny, 21 C."
    result = next(m for m in served.backend.requests[1].conversation if m["role"] == "tool")
    assert "sunny, 21 C" in result["content"]


def test_a_stored_response_is_fetched_and_continued_by_previous_response_id(serve):
    served = serve(["Your name is Ada.", "You told me: Ada."])
    client = served.client()
    first = client.responses.create(model=MODEL, input="My name is Ada.")
    fetched = client.responses.retrieve(first.id)
    assert fetched.id == first.id and fetched.output_text == "Your name is Ada."
    second = client.responses.create(
        model=MODEL, input="What is my name?", previous_response_id=first.id
    )
    assert second.previous_response_id == first.id
    conversation = served.backend.requests[1].conversation
    texts = [m.get("content") or "" for m in conversation]
    assert any("My name is Ada." in t for t in texts)
    assert any("Your name is Ada." in t for t in texts)
    assert any("What is my name?" in t for t in texts)


def test_store_false_keeps_nothing(serve):
    served = serve(["Kept nowhere."])
    client = served.client()
    response = client.responses.create(model=MODEL, input="Hello", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="Again", previous_response_id=response.id)
    assert caught.value.body["param"] == "previous_response_id"


def test_tool_choice_required_and_a_named_function_are_enforced(serve):
    served = serve(["Just text.", "Still text.", "No call."])
    with pytest.raises(openai.InternalServerError) as caught:
        served.client().responses.create(
            model=MODEL, input="Weather in Paris?", tools=[WEATHER], tool_choice="required"
        )
    assert caught.value.code == "no_valid_reply"
    served = serve([calls_reply(("get_weather", {"city": "Oslo"}))])
    response = served.client().responses.create(
        model=MODEL,
        input="Weather in Oslo?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    assert [item.type for item in response.output] == ["function_call"]


def test_json_schema_text_format_makes_json_output(serve):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    served = serve([json.dumps({"city": "Paris"})])
    response = served.client().responses.create(
        model=MODEL,
        input="Which city?",
        text={"format": {"type": "json_schema", "name": "city", "schema": schema}},
    )
    assert json.loads(response.output_text) == {"city": "Paris"}


def test_streamed_events_come_in_the_documented_order_and_rebuild_the_response(serve):
    served = serve(["It is sunny in Paris.", calls_reply(("get_weather", {"city": "Paris"}))])
    client = served.client()
    with client.responses.stream(model=MODEL, input="Weather in Paris?") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    order = [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert [k for k in kinds if k in order] == sorted(
        [k for k in kinds if k in order], key=order.index
    )
    assert final.output_text == "It is sunny in Paris."
    with client.responses.stream(model=MODEL, input="Weather?", tools=[WEATHER]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    (call,) = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Paris"}
    numbers = []
    raw = httpx.post(
        f"{served.url}/responses",
        json={"model": MODEL, "input": "x", "stream": True},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    for line in raw.text.splitlines():
        if line.startswith("data:"):
            numbers.append(json.loads(line[5:])["sequence_number"])
    assert numbers == list(range(len(numbers)))


def test_unsupported_inputs_are_400s_naming_the_field(serve):
    served = serve([])
    cases = [
        ({"model": MODEL, "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        (
            {
                "model": MODEL,
                "input": [{"role": "user", "content": [{"type": "input_image", "url": "x"}]}],
            },
            "input[0].content[0]",
        ),
        ({"model": MODEL}, "input"),
        (
            {"model": MODEL, "input": "x", "tool_choice": {"type": "function", "name": "nope"}},
            "tool_choice",
        ),
    ]
    for body, param in cases:
        reply = httpx.post(
            f"{served.url}/responses", json=body, headers={"Authorization": f"Bearer {KEY}"}
        )
        assert reply.status_code == 400, body
        assert reply.json()["error"]["param"] == param, reply.json()


def test_a_response_is_recorded_in_the_request_log_with_its_api(serve):
    served = serve(["Logged."])
    served.client().responses.create(model=MODEL, input="Hello")
    entry = [e for e in served.log if e.get("path") == "/v1/responses"][-1]
    assert entry["api"] == "responses" and entry["status"] == 200
