"""lokal serve's HTTP surface: keys, bad input (400 naming the field), the bounded queue
(429 + Retry-After), clients that go away, /v1/models, /health, the request log."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest
from serve_support import KEY, QUESTION, TOOLS, WEATHER, calls_reply

from helpers import MODEL_CONFIG
from lokal.llm.backends import Completion
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.progress import report

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow


class Blocking(ScriptedBackend):
    """A scripted model that waits for ``go`` before each reply."""

    def __init__(self, replies=()):
        super().__init__(replies)
        self.go = threading.Event()
        self.entered = threading.Event()

    def generate(self, request):
        self.entered.set()
        if not self.go.wait(15):
            raise AssertionError("never released")
        return super().generate(request)


def _post(served, body, key=KEY, **kwargs):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if isinstance(body, dict):
        body = json.dumps(body)
    return httpx.post(served.url + "/chat/completions", content=body, headers=headers, **kwargs)


def _chat(profile, **extra):
    return {"model": profile.name, "messages": QUESTION, **extra}


def _queue(served):
    state = httpx.get(served.base + "/health", headers={"Authorization": f"Bearer {KEY}"}).json()
    return state["queues"][0] if state["queues"] else {"running": 0, "waiting": 0}


def _until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


# --- keys ---------------------------------------------------------------------------------


def test_a_request_without_the_key_or_with_a_wrong_one_is_401(serve, profile):
    served = serve(["Hello."], api_key=KEY)
    for key in (None, "sk-wrong"):
        response = _post(served, _chat(profile), key=key)
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError):
        served.client(api_key="sk-wrong").models.list()
    assert served.client().chat.completions.create(**_chat(profile)).choices[0].message.content
    assert _until(lambda: len(served.log) == 4)
    logged = json.dumps(served.log)
    assert KEY not in logged and "sk-wrong" not in logged
    assert [entry["status"] for entry in served.log] == [401, 401, 401, 200]


def test_the_key_never_reaches_a_log_file(serve, profile, tmp_path):
    path = tmp_path / "requests.jsonl"
    served = serve(["Hello."], api_key=KEY, log=str(path))
    _post(served, _chat(profile), key="sk-wrong")
    _post(served, _chat(profile))
    # a request is logged when its response has ended, just after the client has it
    assert _until(lambda: len(path.read_text().splitlines()) == 2)
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and [json.loads(line)["status"] for line in lines] == [401, 200]
    assert KEY not in path.read_text() and "sk-wrong" not in path.read_text()


# --- bad input ----------------------------------------------------------------------------

BAD = {
    "malformed_json": (b'{"model": "x", "messages": [', None, "not valid JSON"),
    "not_an_object": (b"[1, 2]", None, "must be a JSON object"),
    "messages_not_a_list": ({"messages": "hi"}, "messages", "list"),
    "no_messages": ({"messages": []}, "messages", "at least 1"),
    "unknown_role": ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", ""),
    "content_wrong_type": (
        {"messages": [{"role": "user", "content": 5}]},
        "messages[0].content",
        "",
    ),
    "temperature_string": ({"temperature": "hot"}, "temperature", "number"),
    "stream_string": ({"stream": "yes"}, "stream", "boolean"),
    "max_tokens_zero": ({"max_tokens": 0}, "max_tokens", "greater than"),
    "n_streamed": ({"n": 2, "stream": True}, "n", "not streamed"),
    "n_too_many": ({"n": 9}, "n", "less than or equal to 8"),
    "tool_not_json_schema": (
        {
            "tools": [
                WEATHER,
                {"type": "function", "function": {"name": "bad", "parameters": {"type": "objekt"}}},
            ]
        },
        "tools[1].function.parameters",
        "",
    ),
    "tool_without_name": (
        {"tools": [{"type": "function", "function": {}}]},
        "tools[0].function.name",
        "",
    ),
    "tool_choice_unknown_tool": (
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
        "tool_choice",
        "nope",
    ),
    "required_without_tools": ({"tool_choice": "required"}, "tool_choice", "needs tools"),
    "response_format_bad_schema": (
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": 3}},
            }
        },
        "response_format.json_schema.schema",
        "",
    ),
    "call_without_result": (
        {
            "messages": [
                *QUESTION,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "and?"},
            ]
        },
        "messages[1]",
        "no tool message",
    ),
    "result_without_call": (
        {"messages": [*QUESTION, {"role": "tool", "tool_call_id": "call_x", "content": "4"}]},
        "messages[1]",
        "answers no tool call",
    ),
    "tool_message_without_id": (
        {"messages": [*QUESTION, {"role": "tool", "content": "4"}]},
        "messages[1].tool_call_id",
        "",
    ),
    "arguments_not_json": (
        {
            "messages": [
                *QUESTION,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{oops"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ]
        },
        "messages[1].tool_calls",
        "arguments",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_a_400_naming_the_field(serve, profile, case):
    body, param, words = BAD[case]
    served = serve([])
    if isinstance(body, dict):
        body = {**_chat(profile), **body}
    response = _post(served, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert words in error["message"]
    assert served.backend.requests == []  # refused before any model ran
    # and the server is still up
    assert (
        httpx.get(served.base + "/health", headers={"Authorization": f"Bearer {KEY}"}).status_code
        == 200
    )


def test_an_oversized_body_is_a_400(serve, profile):
    served = serve(["Hello."], max_body_bytes=2000)
    body = _chat(profile, messages=[{"role": "user", "content": "x" * 5000}])
    response = _post(served, body)
    assert response.status_code == 400
    assert "larger than the limit of 2000 bytes" in response.json()["error"]["message"]
    assert _post(served, _chat(profile)).status_code == 200


def test_reordered_tool_results_and_content_parts_are_accepted(serve, profile):
    served = serve(["Sunny, 12:00."])
    calls = [
        {
            "id": "call_w",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {
            "id": "call_t",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"city": "Paris"}'},
        },
    ]
    messages = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather and time in Paris?"}]},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_t", "content": "12:00"},
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny"},
    ]
    reply = served.client().chat.completions.create(
        model=profile.name, messages=messages, tools=TOOLS
    )
    assert reply.choices[0].message.content == "Sunny, 12:00."


# --- the queue ----------------------------------------------------------------------------


def test_a_full_queue_is_a_429_with_retry_after(serve, profile):
    backend = Blocking(["one", "two", "three"])
    served = serve(backend, max_queue=1)
    results = {}

    def ask(name):
        results[name] = _post(served, _chat(profile), timeout=20)

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert backend.entered.wait(5)
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    assert _until(lambda: _queue(served)["waiting"] == 1)
    with pytest.raises(openai.RateLimitError) as refused:
        served.client().chat.completions.create(**_chat(profile))
    headers = refused.value.response.headers
    assert int(headers["retry-after"]) >= 1
    assert 1 <= int(headers["retry-after-ms"]) <= 1000 * int(headers["retry-after"])
    assert refused.value.response.json()["error"]["code"] == "queue_full"
    backend.go.set()
    first.join(10)
    second.join(10)
    assert results["first"].status_code == results["second"].status_code == 200
    assert [
        r.json()["choices"][0]["message"]["content"] for r in (results["first"], results["second"])
    ] == [
        "one",
        "two",
    ]
    assert _until(lambda: len([e for e in served.log if e["path"].endswith("completions")]) == 3)
    assert sorted(e["status"] for e in served.log if e["path"] == "/v1/chat/completions") == [
        200,
        200,
        429,
    ]


def test_a_client_that_leaves_the_queue_frees_its_place(serve, profile):
    backend = Blocking(["one", "two"])
    served = serve(backend, max_queue=1)
    first = threading.Thread(target=lambda: _post(served, _chat(profile), timeout=20))
    first.start()
    assert backend.entered.wait(5)
    with pytest.raises(httpx.TimeoutException):
        _post(served, _chat(profile), timeout=0.5)  # waits in the queue, then goes away
    assert _until(lambda: _queue(served)["waiting"] == 0)
    results = []
    third = threading.Thread(
        target=lambda: results.append(_post(served, _chat(profile), timeout=20))
    )
    third.start()
    assert _until(lambda: _queue(served)["waiting"] == 1)  # queued, not refused
    backend.go.set()
    first.join(10)
    third.join(10)
    assert (
        results[0].status_code == 200
        and results[0].json()["choices"][0]["message"]["content"] == "two"
    )


def _slow_reply(request):
    for _ in range(400):  # about 20 s unless the server stops it
        report(tokens=1, text="x ")
        time.sleep(0.05)
    return Completion("late", 1, 1, "stop")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_client_that_leaves_during_generation_frees_the_model(serve, profile, stream):
    served = serve([_slow_reply, "next"])
    if stream:
        with httpx.stream(
            "POST",
            served.url + "/chat/completions",
            json=_chat(profile, stream=True),
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=20,
        ) as response:
            for line in response.iter_lines():
                if '"x' in line:  # generation is under way
                    break
    else:
        with pytest.raises(httpx.TimeoutException):
            _post(served, _chat(profile), timeout=0.5)
    assert _until(lambda: _queue(served)["running"] == 0, seconds=5)
    reply = served.client().chat.completions.create(**_chat(profile))
    assert reply.choices[0].message.content == "next"
    assert _until(lambda: any(entry.get("disconnected") for entry in served.log))


# --- models, health, errors of the model --------------------------------------------------


def test_models_lists_every_profile_default_first(serve):
    served = serve([], config=MODEL_CONFIG)
    ids = [model.id for model in served.client().models.list()]
    assert ids[0] == "smollm2-135m"
    assert {"smollm2-135m-free", "smollm2-135m-constrained", "mock"} <= set(ids)
    assert len(ids) == len(set(ids))
    chosen = serve([], config=MODEL_CONFIG, profile="mock")
    assert next(iter(chosen.client().models.list())).id == "mock"


def test_health(serve, profile):
    served = serve(["Hello."], api_key=KEY)
    health = httpx.get(served.base + "/health", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert health["status"] == "ok" and health["models"] == [profile.name]


def test_health_answers_without_the_key_and_reveals_only_the_status(serve, profile):
    served = serve(["Hello."], api_key=KEY)
    for headers in ({}, {"Authorization": "Bearer sk-wrong"}):
        response = httpx.get(served.base + "/health", headers=headers)
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}
        assert profile.name not in response.text
    # everything under /v1 and /traces still needs the key
    assert httpx.get(served.url + "/models").status_code == 401
    assert httpx.get(served.base + "/traces").status_code == 401


GHOST = {  # a mock that loads, and a profile whose model folder is not on this machine
    "model": {"name": "mock", "backend": "mock"},
    "tool_calling": {"mode": "prompt_json"},
    "models": {"ghost": {"backend": "transformers", "model_name_or_path": "/no/such/model"}},
}


def _counted_server(config):
    from serve_support import Served

    from lokal.serve.app import create_app

    log: list[dict] = []
    return Served(create_app(config, api_key=KEY, log=log.append), log)


def test_an_unknown_model_is_a_404_model_not_found_asked_once(serve, profile):
    served = serve([])
    with pytest.raises(openai.NotFoundError) as failed:
        served.client(max_retries=2).chat.completions.create(**_chat(profile, model="gpt-4o"))
    error = failed.value.body
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "available" in error["message"]
    assert _until(lambda: len(served.log) == 1)
    time.sleep(0.2)
    assert len(served.log) == 1


def test_a_profile_that_cannot_load_is_not_listed_and_is_a_404_asked_once():
    served = _counted_server(GHOST)
    try:
        client = served.client(max_retries=2)  # the SDK's default retries
        assert [m.id for m in client.models.list()] == ["mock"]
        with pytest.raises(openai.NotFoundError) as failed:
            client.chat.completions.create(model="ghost", messages=QUESTION)
        assert failed.value.body["code"] == "model_not_found"
        assert "cannot be loaded here" in failed.value.body["message"]
        assert (
            "/no/such/model" in failed.value.body["message"]
            or "not installed" in (failed.value.body["message"])
        )
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("ghost")
        assert _until(lambda: len(served.log) == 3)
        time.sleep(0.2)
        chats = [e for e in served.log if e["path"] == "/v1/chat/completions"]
        assert len(chats) == 1 and chats[0]["status"] == 404  # one request, not retried
        reply = client.chat.completions.create(model="mock", messages=QUESTION)
        assert reply.choices[0].message is not None
        health = httpx.get(served.base + "/health", headers={"Authorization": f"Bearer {KEY}"})
        assert "ghost" in health.json()["unavailable"]
    finally:
        served.stop()


def test_an_unknown_path_is_a_404_in_openai_shape(serve):
    served = serve([])
    response = httpx.get(served.base + "/v1/nothing")
    assert response.status_code == 404 and "error" in response.json()


def test_a_model_that_gives_no_usable_reply_is_a_500_the_sdk_does_not_retry(serve, profile):
    served = serve([calls_reply(("nope", {})), calls_reply(("nope", {}))])
    client = served.client(max_retries=2)
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(**_chat(profile, tools=TOOLS))
    assert failed.value.response.headers["x-should-retry"] == "false"
    assert len(served.backend.requests) == 2  # one decision with its retry, not three


def test_a_reply_cut_off_at_max_tokens_finishes_with_length(serve, profile):
    cut = Completion("The weather in Paris is", 10, 5, "length")
    served = serve([cut, cut])
    reply = served.client().chat.completions.create(**_chat(profile, max_tokens=5))
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].message.content == "The weather in Paris is"
    assert served.backend.requests[0].settings.max_new_tokens == 5


def test_sampling_fields_reach_the_backend(serve, profile):
    served = serve(["Hello."])
    served.client().chat.completions.create(
        **_chat(profile, temperature=0.5, seed=7, stop=["END"], max_completion_tokens=33)
    )
    settings = served.backend.requests[0].settings
    assert (settings.temperature, settings.seed, settings.stop, settings.max_new_tokens) == (
        0.5,
        7,
        ("END",),
        33,
    )


def test_n_choices_are_replies_of_their_own_each_with_its_seed(serve, profile):
    """llama.cpp#11142, llama-cpp-python#1906: ``n`` is not ignored. Each choice is a
    decision of its own (its calls validated, its ids fresh), drawn with the request's seed
    plus its index; the usage counts them all."""
    served = serve(["First.", calls_reply(("get_weather", {"city": "Oslo"})), "Third."])
    reply = served.client().chat.completions.create(
        model=profile.name, messages=QUESTION, tools=TOOLS, n=3, seed=7, temperature=0.8
    )
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert reply.choices[0].message.content == "First."
    assert reply.choices[1].message.tool_calls[0].function.name == "get_weather"
    assert reply.choices[1].finish_reason == "tool_calls"
    assert reply.choices[2].message.content == "Third."
    seeds = [r.settings.seed for r in served.backend.requests]
    assert seeds == [7, 8, 9]
    alone = (
        serve(["First."])
        .client()
        .chat.completions.create(
            model=profile.name, messages=QUESTION, tools=TOOLS, seed=7, temperature=0.8
        )
    )
    assert len(alone.choices) == 1
    assert reply.usage.prompt_tokens == 3 * alone.usage.prompt_tokens > 0
