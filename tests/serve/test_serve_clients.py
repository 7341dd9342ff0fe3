"""Unmodified third-party clients against lokal serve: an openai-agents agent loop with one
tool (tracing off, nothing leaves the machine), and the stream helper of the openai SDK."""

from __future__ import annotations

import pytest
from serve_support import KEY, QUESTION, TOOLS, calls_reply

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

agents = pytest.importorskip("agents")


def test_openai_agents_loop_with_one_tool(serve, profile):
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    seen = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        seen.append(city)
        return f"sunny and 21 C in {city}"

    served = serve(
        [calls_reply(("get_weather", {"city": "Paris"})), "It is sunny and 21 C in Paris."]
    )
    client = AsyncOpenAI(base_url=served.url, api_key=KEY, max_retries=0)
    agent = agents.Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=agents.OpenAIChatCompletionsModel(model=profile.name, openai_client=client),
    )
    result = agents.Runner.run_sync(agent, "What is the weather in Paris?", max_turns=4)
    assert seen == ["Paris"]
    assert result.final_output == "It is sunny and 21 C in Paris."
    # the second decision saw the tool's result, answering the call by its id
    second = served.backend.requests[1].conversation
    assert second[-1]["role"] == "tool" and "sunny and 21 C" in second[-1]["content"]


def test_openai_sdk_stream_helper(serve, profile):
    """``client.chat.completions.stream`` (the SDK's event API) reads lokal's stream."""
    served = serve([calls_reply(("get_weather", {"city": "Paris"}))])
    with served.client().chat.completions.stream(
        model=profile.name, messages=QUESTION, tools=TOOLS
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.done" in kinds
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and call.function.arguments == '{"city": "Paris"}'


def test_openai_agents_loop_on_its_default_responses_model(serve, profile):
    """The openai-agents SDK's default model class speaks the Responses API: an unmodified
    agent with one tool runs against lokal's /v1/responses (llama.cpp#19138, vllm#14721:
    servers without it cannot run such agents)."""
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    seen = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        seen.append(city)
        return f"sunny and 21 C in {city}"

    served = serve(
        [calls_reply(("get_weather", {"city": "Paris"})), "It is sunny and 21 C in Paris."]
    )
    client = AsyncOpenAI(base_url=served.url, api_key=KEY, max_retries=0)
    agent = agents.Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=agents.OpenAIResponsesModel(model=profile.name, openai_client=client),
    )
    result = agents.Runner.run_sync(agent, "What is the weather in Paris?", max_turns=4)
    assert seen == ["Paris"]
    assert result.final_output == "It is sunny and 21 C in Paris."
    second = served.backend.requests[1].conversation
    assert second[-1]["role"] == "tool" and "sunny and 21 C" in second[-1]["content"]
    paths = [entry.get("path") for entry in served.log]
    assert paths.count("/v1/responses") == 2 and "/v1/chat/completions" not in paths
