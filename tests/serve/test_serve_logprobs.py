"""Log-probabilities on chat completions (``logprobs``, ``top_logprobs``): the wire (which
tokens are the answer's, plain and streamed) with a named fake that reports made-up
log-probabilities for the scripted text; the clear 400 on a backend that cannot report them.
The llama.cpp side (real values from the bundled model) is tested in
tests/llm/test_llamacpp_backend.py and tests/serve/test_serve_model.py."""

from __future__ import annotations

import json

import openai
import pytest
from serve_support import QUESTION, accumulate, calls_reply

from lokal.llm.backends.scripted import ScriptedBackend

MODEL = "smollm2-135m-free"


class FakeLogprobBackend(ScriptedBackend):
    """FAKE: the scripted replies, with made-up log-probabilities, one entry a character
    (the real values come from llama.cpp; this checks what the server does with them)."""

    reports_logprobs = True

    def generate(self, request):
        completion = super().generate(request)
        top = request.settings.logprobs
        if top is not None:
            completion.details["logprobs"] = [
                {
                    "token": ch,
                    "logprob": -0.5,
                    "bytes": list(ch.encode()),
                    "top_logprobs": [{"token": ch, "logprob": -0.5, "bytes": list(ch.encode())}]
                    * top,
                }
                for ch in completion.text
            ]
        return completion


def test_the_answers_tokens_are_given_without_the_envelope_around_them(serve):
    reply = json.dumps({"content": "Hi Sam."})
    served = serve(FakeLogprobBackend([reply, reply]))
    client = served.client()
    plain = client.chat.completions.create(
        model=MODEL, messages=QUESTION, logprobs=True, top_logprobs=2
    )
    content = plain.choices[0].logprobs.content
    assert "".join(t.token for t in content) == "Hi Sam." == plain.choices[0].message.content
    assert all(len(t.top_logprobs) == 2 for t in content)
    stream = client.chat.completions.create(
        model=MODEL, messages=QUESTION, logprobs=True, top_logprobs=2, stream=True
    )
    streamed, _ = accumulate(stream)
    assert [t.token for t in streamed.choices[0].logprobs.content] == [t.token for t in content]


def test_a_reply_of_calls_has_no_content_logprobs_and_none_are_given_unasked(serve):
    served = serve(FakeLogprobBackend([calls_reply(("get_weather", {"city": "Paris"})), "Plain."]))
    client = served.client()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    calls = client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=tools, logprobs=True
    )
    assert calls.choices[0].message.tool_calls and calls.choices[0].logprobs.content is None
    plain = client.chat.completions.create(model=MODEL, messages=QUESTION)
    assert plain.choices[0].logprobs is None


def test_a_backend_that_cannot_report_them_is_a_400_naming_logprobs(serve):
    served = serve(["Hello."])
    with pytest.raises(openai.BadRequestError) as caught:
        served.client().chat.completions.create(model=MODEL, messages=QUESTION, logprobs=True)
    assert caught.value.code == "logprobs_not_supported"
    assert caught.value.body["param"] == "logprobs"
    with pytest.raises(openai.BadRequestError) as caught:
        served.client().chat.completions.create(model=MODEL, messages=QUESTION, top_logprobs=2)
    assert caught.value.body["param"] == "top_logprobs"
    assert served.backend.remaining == 1  # neither reached the model
