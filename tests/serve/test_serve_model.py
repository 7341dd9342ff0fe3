"""lokal serve on the bundled model (llama.cpp), through the openai SDK. Marked ``model``.

Mechanisms only: a reply of the right shape or the server's labelled ``no_valid_reply`` error,
streamed equal to plain; never what the 135M model writes (its greedy text differs between
CPUs; the scripted tests of tests/serve check the wire format of each case)."""

from __future__ import annotations

import json

import openai
import pytest
from serve_support import WEATHER, accumulate, shape

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


def outcome(create):
    """A reply's shape, or the labelled error the server sent instead (plain or streamed)."""
    try:
        return "reply", create()
    except openai.APIError as exc:
        assert exc.code == "no_valid_reply", (exc.code, exc.message)
        assert "no usable reply" in exc.message
        return "error", exc.message


@pytest.mark.parametrize("name", ["smollm2-135m", "smollm2-135m-constrained"])
def test_required_gives_a_valid_call(bundled, name):
    served = bundled(name)
    kind, reply = outcome(
        lambda: served.client(timeout=300, max_retries=0).chat.completions.create(
            model=name, messages=QUESTION, tools=[WEATHER], tool_choice="required"
        )
    )
    if kind == "error":  # the model gave no valid call: said so (in outcome), never text
        return
    choice = reply.choices[0]
    if choice.finish_reason == "length":  # cut off at the token budget, labelled as such
        assert not choice.message.tool_calls
        return
    (call,) = choice.message.tool_calls[:1]
    assert choice.finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    assert isinstance(json.loads(call.function.arguments)["city"], str)


def test_auto_streamed_equals_plain(bundled):
    served = bundled("smollm2-135m")
    client = served.client(timeout=300)
    kwargs = {"model": "smollm2-135m", "messages": QUESTION, "tools": [WEATHER]}
    plain = outcome(lambda: client.chat.completions.create(**kwargs))
    streamed = outcome(
        lambda: accumulate(client.chat.completions.create(stream=True, **kwargs), [WEATHER])[0]
    )
    assert plain[0] == streamed[0], (plain, streamed)
    if plain[0] == "error":
        return
    a, b = plain[1].choices[0], streamed[1].choices[0]
    assert a.finish_reason in ("stop", "tool_calls", "length")
    assert shape(plain[1]) == shape(streamed[1])
    assert [(c.function.name, c.function.arguments) for c in a.message.tool_calls or []] == [
        (c.function.name, c.function.arguments) for c in b.message.tool_calls or []
    ]


def test_none_answers_in_text(bundled):
    served = bundled("smollm2-135m")
    kind, reply = outcome(
        lambda: served.client(timeout=300, max_retries=0).chat.completions.create(
            model="smollm2-135m", messages=QUESTION, tools=[WEATHER], tool_choice="none"
        )
    )
    if kind == "error":
        return
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert isinstance(reply.choices[0].message.content, str)


def test_anthropic_count_tokens_counts_the_prompt_on_the_models_tokenizer(bundled):
    """``/v1/messages/count_tokens`` on llama.cpp: the prompt's tokens, more with a tool on
    offer than without (its schema is in the prompt); any CPU gives the same count."""
    import anthropic

    served = bundled("smollm2-135m")
    sdk = anthropic.Anthropic(base_url=served.base, api_key="x", max_retries=0, timeout=60)
    weather = {**WEATHER["function"]}
    tool = {"name": weather["name"], "input_schema": weather["parameters"]}
    plain = sdk.messages.count_tokens(model="smollm2-135m", messages=QUESTION)
    with_tool = sdk.messages.count_tokens(model="smollm2-135m", messages=QUESTION, tools=[tool])
    assert 0 < plain.input_tokens < with_tool.input_tokens


@pytest.mark.parametrize("name", ["smollm2-135m-free", "smollm2-135m-constrained"])
def test_logprobs_on_the_bundled_model_are_the_answers_tokens(bundled, name):
    """logprobs on llama.cpp through the server: a reply (or the labelled error), whose
    logprobs are either absent with a reason (a reply of calls, or an answer not written as
    generated, e.g. escaped inside lokal's envelope) or the answer's tokens: their text
    covers the answer, each drawn greedily as its first alternative."""
    client = bundled(name).client()
    kind, reply = outcome(
        lambda: client.chat.completions.create(
            model=name, messages=QUESTION, logprobs=True, top_logprobs=2, max_tokens=40
        )
    )
    if kind == "error":
        return
    choice = reply.choices[0]
    assert choice.logprobs is not None
    if choice.logprobs.content is None:
        return
    text = "".join(t.token for t in choice.logprobs.content)
    assert choice.message.content in text and choice.logprobs.content
    for token in choice.logprobs.content:
        assert token.logprob <= 0 and len(token.top_logprobs) == 2
        assert token.top_logprobs[0].token == token.token
