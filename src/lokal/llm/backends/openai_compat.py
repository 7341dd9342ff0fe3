"""OpenAI-compatible backend: vLLM, Ollama, llama.cpp server, hosted APIs.

Two ways to pass tools:

- text mode (``prompt_json``, ``constrained``): lokal's prompt and parser; constrained mode
  sends the reply schema as ``response_format`` (json_schema), which llama.cpp server and
  vLLM enforce with their grammar engines.
- native mode (``builtin``): ``tools=`` is sent and the response's ``tool_calls`` become the
  AIMessage; when the server leaves the call in ``content`` (many small models' templates
  do), lokal's parser reads it from there.

The key comes from the environment variable named by ``api_key_env``, never from the YAML.
Timeouts and retries with exponential backoff on 408/409/429/5xx and connection errors are
the OpenAI SDK's (``http_retries`` sets how many).
"""

from __future__ import annotations

import json
import os
from typing import Any

from lokal.config import Profile
from lokal.errors import BackendError, ConfigError
from lokal.llm.backends import Completion, GenerationRequest

__all__ = ["OpenAICompatBackend"]


def _text_mode_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompt messages a strict server accepts without native tool calls: a ToolMessage
    becomes a user turn that names the tool (a ``tool`` role needs a native call before it)."""
    converted = []
    for message in messages:
        if message.get("role") == "tool":
            name = message.get("name") or "tool"
            converted.append(
                {"role": "user", "content": f"[tool result: {name}]\n{message.get('content', '')}"}
            )
        else:
            converted.append({"role": message["role"], "content": message.get("content") or ""})
    return converted


def _native_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompt messages in OpenAI's native form (``function.arguments`` as a JSON string)."""
    converted = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = dict(call["function"])
                if not isinstance(function.get("arguments"), str):
                    function["arguments"] = json.dumps(function.get("arguments") or {})
                calls.append({"id": call.get("id"), "type": "function", "function": function})
            converted.append(
                {
                    "role": "assistant",
                    "content": message.get("content") or None,
                    "tool_calls": calls,
                }
            )
        else:
            converted.append(message)
    return converted


def _decode_object(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class OpenAICompatBackend:
    """A client of one OpenAI-compatible server (thread-safe: the SDK client is)."""

    name = "openai"
    capabilities = frozenset({"prompt_json", "builtin", "constrained"})

    def __init__(self, profile: Profile) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ConfigError(
                "the openai backend needs the openai package: pip install openai"
            ) from exc
        settings = profile.model
        if not settings.base_url:
            raise ConfigError(f"profile {profile.name!r}: the openai backend needs base_url")
        api_key = "not-needed"
        if settings.api_key_env:
            api_key = os.environ.get(settings.api_key_env, "")
            if not api_key:
                raise ConfigError(
                    f"profile {profile.name!r}: set the environment variable "
                    f"{settings.api_key_env} to the server's API key"
                )
        self._openai = openai
        self.client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=api_key,
            timeout=settings.timeout,
            max_retries=settings.http_retries,
        )
        self.model = settings.model or "default"
        self.base_url = settings.base_url
        self.response_format = settings.response_format

    def generate(self, request: GenerationRequest) -> Completion:
        s = request.settings
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": s.max_new_tokens,
            "temperature": 0.0 if s.greedy else s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
        }
        if s.stop:
            kwargs["stop"] = list(s.stop)
        if request.pass_tools and request.tools:
            kwargs["messages"] = _native_messages(request.messages)
            kwargs["tools"] = request.tools
        else:
            kwargs["messages"] = _text_mode_messages(request.messages)
        if request.response_schema and self.response_format == "json_object":
            kwargs["response_format"] = {"type": "json_object", "schema": request.response_schema}
        elif request.response_schema:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": request.response_schema, "strict": True},
            }
        try:
            response = self.client.chat.completions.create(**kwargs)
        except self._openai.APIStatusError as exc:
            raise BackendError(
                f"{self.base_url} answered HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except self._openai.APIError as exc:  # connection errors and timeouts, after retries
            raise BackendError(f"{self.base_url}: {exc}") from exc
        choice = response.choices[0]
        message = choice.message
        text = message.content or ""
        native = None
        if message.tool_calls:
            calls = [
                (c.id, c.function.name, c.function.arguments or "{}") for c in message.tool_calls
            ]
            decoded = [_decode_object(raw) for _, _, raw in calls]
            if all(args is not None for args in decoded):
                native = [
                    {"id": ident, "name": name, "args": args}
                    for (ident, name, _), args in zip(calls, decoded, strict=True)
                ]
            else:
                # leave malformed calls to the universal parser, which repairs almost-JSON
                text += "".join(
                    f'\n<tool_call>{{"name": {json.dumps(name)}, "arguments": {raw}}}</tool_call>'
                    for _, name, raw in calls
                )
        usage = response.usage
        return Completion(
            text=text,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            finish_reason=choice.finish_reason,
            native_tool_calls=native,
        )
