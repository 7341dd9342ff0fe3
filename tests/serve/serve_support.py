"""Tools, scripted replies and helpers shared by the ``lokal serve`` tests."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.lib.streaming.chat import ChatCompletionStreamState

from servers import AppServer

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
PING = {  # a tool without parameters
    "type": "function",
    "function": {"name": "ping", "description": "Check the service.", "parameters": {}},
}
TOOLS = [WEATHER, TIME]
QUESTION = [{"role": "user", "content": "What is the weather and the time in Paris?"}]


def calls_reply(*calls: tuple[str, dict]) -> str:
    """A JSON envelope with calls, as lokal's prompt asks a model to write it."""
    return json.dumps({"tool_calls": [{"name": n, "args": a} for n, a in calls]})


def hermes(*calls: tuple[str, dict]) -> str:
    return "\n".join(
        f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls
    )


def accumulate(stream: Any, tools: list[dict] | None = None) -> Any:
    """A streamed reply rebuilt with the openai SDK's own accumulator; also the raw chunks."""
    state = ChatCompletionStreamState(input_tools=tools or [])
    chunks = []
    for item in stream:
        chunks.append(item)
        if item.choices:
            state.handle_chunk(item)
    return state.get_final_completion(), chunks


def shape(completion: Any) -> dict[str, Any]:
    """What must be equal between a streamed and a non-streamed reply (ids aside, which are
    fresh per request)."""
    choice = completion.choices[0]
    message = choice.message
    return {
        "content": message.content,
        "finish_reason": choice.finish_reason,
        "tool_calls": [
            (c.type, c.function.name, json.loads(c.function.arguments))
            for c in message.tool_calls or []
        ],
        "ids": [c.id.startswith("call_") for c in message.tool_calls or []],
    }


KEY = "sk-test-secret-0123456789"


class Served(AppServer):
    """A running server: ``url`` (…/v1), ``client()`` (an openai.OpenAI), the ``log``."""

    def __init__(self, app: Any, log: list[dict[str, Any]], lifespan: str = "off") -> None:
        super().__init__(app, lifespan=lifespan)
        self.log = log
        self.url = self.base + "/v1"

    def client(self, api_key: str = KEY, **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 20)
        return openai.OpenAI(base_url=self.url, api_key=api_key, **kwargs)
