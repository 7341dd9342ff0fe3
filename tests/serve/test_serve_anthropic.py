"""``/v1/messages`` and ``/v1/messages/count_tokens`` driven by the official ``anthropic``
SDK against a real server on loopback; the decisions are scripted (ScriptedBackend)."""

from __future__ import annotations

import anthropic
import httpx
import pytest
from serve_support import KEY, calls_reply

MODEL = "smollm2-135m-free"  # the profile tests/serve/conftest.py serves
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def client(served, api_key: str = KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=served.base, api_key=api_key, max_retries=0, timeout=20)


def test_a_text_answer_is_a_message_ending_its_turn(serve):
    served = serve(["It is sunny in Paris."], api_key=KEY)
    message = client(served).messages.create(
        model=MODEL, max_tokens=64, system="Be brief.", messages=ASK
    )
    assert message.type == "message" and message.role == "assistant"
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "It is sunny in Paris."
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0
    prompt = served.backend.requests[0].conversation
    assert prompt[0]["role"] == "system" and "Be brief." in prompt[0]["content"]


def test_a_call_is_a_tool_use_block_and_its_result_goes_back_as_a_tool_message(serve):
    served = serve([calls_reply(("get_weather", {"city": "Paris"})), "Sunny, 21 C."])
    sdk = client(served)
    first = sdk.messages.create(model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER])
    assert first.stop_reason == "tool_use"
    (use,) = [block for block in first.content if block.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"city": "Paris"}
    turn = [
        *ASK,
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 21 C"}],
        },
    ]
    second = sdk.messages.create(model=MODEL, max_tokens=64, messages=turn, tools=[WEATHER])
    assert second.content[0].text == "Sunny, 21 C." and second.stop_reason == "end_turn"
    conversation = served.backend.requests[1].conversation
    result = next(m for m in conversation if m["role"] == "tool")
    assert "sunny, 21 C" in result["content"]


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}])
def test_tool_choice_any_and_tool_make_an_answer_without_a_call_unusable(serve, choice):
    # the free profile parses what the script says: a text reply breaks tool_choice any/tool,
    # is retried, and with no good reply left the client gets Anthropic's error shape
    served = serve(["Just text.", "Still text.", "No call."])
    with pytest.raises(anthropic.InternalServerError) as caught:
        client(served).messages.create(
            model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER], tool_choice=choice
        )
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert "no usable reply" in body["error"]["message"]


def test_tool_choice_none_answers_without_offering_the_tools(serve):
    served = serve(["No tools needed."])
    message = client(served).messages.create(
        model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER], tool_choice={"type": "none"}
    )
    assert message.content[0].text == "No tools needed."


def test_streamed_text_and_tool_use_rebuild_to_the_same_message(serve):
    served = serve(["It is sunny in Paris.", calls_reply(("get_weather", {"city": "Paris"}))])
    sdk = client(served)
    with sdk.messages.stream(model=MODEL, max_tokens=64, messages=ASK) as stream:
        kinds = [event.type for event in stream]
        text = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "message_delta" in kinds
    assert text.content[0].text == "It is sunny in Paris." and text.stop_reason == "end_turn"
    with sdk.messages.stream(model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER]) as stream:
        call = stream.get_final_message()
    (use,) = call.content
    assert use.type == "tool_use" and use.input == {"city": "Paris"}
    assert call.stop_reason == "tool_use"


def test_the_key_is_accepted_as_x_api_key_and_a_wrong_one_is_anthropics_401(serve):
    served = serve(["Hello."], api_key=KEY)
    assert client(served).messages.create(model=MODEL, max_tokens=16, messages=ASK).content
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client(served, api_key="wrong").messages.create(model=MODEL, max_tokens=16, messages=ASK)
    assert caught.value.body["error"]["type"] == "authentication_error"


def test_bad_requests_are_400s_in_anthropics_shape(serve):
    served = serve([])
    cases = [
        {"model": MODEL, "messages": ASK},  # no max_tokens
        {"model": MODEL, "max_tokens": 8, "messages": []},
        {
            "model": MODEL,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
        },
        {
            "model": MODEL,
            "max_tokens": 8,
            "messages": ASK,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        },
    ]
    for body in cases:
        reply = httpx.post(f"{served.base}/v1/messages", json=body, headers={"x-api-key": KEY})
        assert reply.status_code == 400, body
        error = reply.json()
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    missing = httpx.post(
        f"{served.base}/v1/messages",
        json={"model": "nope", "max_tokens": 8, "messages": ASK},
        headers={"x-api-key": KEY},
    )
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"


def test_requests_of_both_apis_share_one_request_log(serve):
    served = serve(["One.", "Two."])
    served.client().chat.completions.create(model=MODEL, messages=ASK)
    client(served).messages.create(model=MODEL, max_tokens=16, messages=ASK)
    paths = [entry["path"] for entry in served.log if entry.get("path")]
    assert paths == ["/v1/chat/completions", "/v1/messages"]
    assert served.log[-1]["api"] == "anthropic" and served.log[-1]["lokal_status"] == "success"


def test_count_tokens_needs_a_backend_with_a_tokenizer(serve):
    served = serve([])
    with pytest.raises(anthropic.BadRequestError) as caught:
        client(served).messages.count_tokens(model=MODEL, messages=ASK)
    assert "cannot count tokens" in caught.value.body["error"]["message"]


def test_a_request_through_each_api_is_kept_as_a_trace_shown_at_traces(serve, tmp_path):
    from lokal.trace import read_trace

    served = serve(["One.", "Two.", "Three."], traces_dir=tmp_path)
    served.client().chat.completions.create(model=MODEL, messages=ASK)
    client(served).messages.create(model=MODEL, max_tokens=16, messages=ASK)
    served.client().responses.create(model=MODEL, input="What is the weather in Paris?")
    kept = sorted(tmp_path.glob("*.jsonl"))
    assert len(kept) == 3
    for path in kept:
        events = read_trace(path)
        assert events[0]["type"] == "run_start" and events[-1]["type"] == "final"
        assert events[0]["question"] == "What is the weather in Paris?"
    page = httpx.get(f"{served.base}/traces", headers={"Authorization": f"Bearer {KEY}"})
    assert page.status_code == 200 and all(path.name in page.text for path in kept)
