"""lokal serve on the bundled model (llama.cpp), through the openai SDK. Marked ``model``."""

from __future__ import annotations

import json

import pytest
from serve_support import WEATHER, accumulate

from helpers import MODEL_CONFIG

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def bundled(serve):
    pytest.importorskip("llama_cpp")
    from lokal.config import load_profile
    from lokal.llm.backends import get_backend

    served = {}

    def start(name):
        if name not in served:
            profile = load_profile(MODEL_CONFIG, name)
            served[name] = serve(get_backend(profile), config=profile)
        return served[name]

    return start


@pytest.mark.parametrize("name", ["smollm2-135m", "smollm2-135m-constrained"])
def test_required_gives_a_valid_call(bundled, name):
    served = bundled(name)
    reply = served.client(timeout=300).chat.completions.create(
        model=name, messages=QUESTION, tools=[WEATHER], tool_choice="required"
    )
    call = reply.choices[0].message.tool_calls[0]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)


def test_auto_streamed_equals_plain(bundled):
    served = bundled("smollm2-135m")
    client = served.client(timeout=300)
    kwargs = {"model": "smollm2-135m", "messages": QUESTION, "tools": [WEATHER]}
    plain = client.chat.completions.create(**kwargs)
    streamed, _ = accumulate(client.chat.completions.create(stream=True, **kwargs), [WEATHER])
    a, b = plain.choices[0], streamed.choices[0]
    assert a.finish_reason == b.finish_reason
    assert a.message.content == b.message.content
    assert [(c.function.name, c.function.arguments) for c in a.message.tool_calls or []] == [
        (c.function.name, c.function.arguments) for c in b.message.tool_calls or []
    ]


def test_none_answers_in_text(bundled):
    served = bundled("smollm2-135m")
    reply = served.client(timeout=300).chat.completions.create(
        model="smollm2-135m", messages=QUESTION, tools=[WEATHER], tool_choice="none"
    )
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].message.content
