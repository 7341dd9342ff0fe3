"""Anthropic's Messages API on the wire: a request read into a chat completions request (so
that one set of checks, one decision engine and one queue serve both), a decision written
as a Message, the streaming events, and errors in Anthropic's shape.

Supported: ``system`` (text or text blocks), ``text`` / ``tool_use`` / ``tool_result``
content blocks (``thinking`` blocks of earlier turns are dropped), client ``tools`` with
``input_schema``, ``tool_choice`` ``auto`` / ``any`` / ``tool`` / ``none`` (with
``disable_parallel_tool_use``), ``max_tokens``, ``temperature``, ``top_p``,
``stop_sequences``, ``stream``. Images, documents and Anthropic's server tools (web search
and the like) are refused with a 400 naming the block.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lokal.config import Profile
from lokal.records import Decision
from lokal.serve import wire

__all__ = [
    "CountRequest",
    "MessagesRequest",
    "error_body",
    "message_response",
    "stop_reason",
    "to_chat",
]

# Anthropic's error types by HTTP status
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    499: "api_error",
    500: "api_error",
    503: "overloaded_error",
}


class _Model(BaseModel):
    # unknown fields (metadata, service_tier, thinking, cache_control ...) are accepted
    # and ignored, as Anthropic-compatible servers do
    model_config = ConfigDict(strict=True, extra="allow")


class Block(_Model):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: str | list[Block] | None = None
    is_error: bool | None = None


class _Message(_Model):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class _Tool(_Model):
    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None  # "custom" or absent; Anthropic's server tools are refused


class _Choice(_Model):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class CountRequest(_Model):
    """``POST /v1/messages/count_tokens``: a Message request without ``max_tokens``."""

    model: str
    messages: list[_Message] = Field(min_length=1)
    system: str | list[Block] | None = None
    tools: list[_Tool] | None = None
    tool_choice: _Choice | None = None


class MessagesRequest(CountRequest):
    """``POST /v1/messages``."""

    max_tokens: int = Field(ge=1)
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)
    stop_sequences: list[str] | None = None
    stream: bool | None = None


def _text_of(content: str | list[Block] | None, where: str) -> str:
    """The text of a ``tool_result``'s content (text blocks only)."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for j, block in enumerate(content):
        if block.type != "text":
            raise wire.APIError(
                f"{where}[{j}]: only text blocks are supported here, got {block.type!r}",
                param=f"{where}[{j}]",
            )
        parts.append(block.text or "")
    return "".join(parts)


def _system(system: str | list[Block] | None) -> list[dict[str, Any]]:
    text = _text_of(system, "system")
    return [{"role": "system", "content": text}] if text else []


def _user(message: _Message, where: str) -> list[dict[str, Any]]:
    """A user turn: its tool results (as tool messages, first), then its text."""
    if isinstance(message.content, str):
        return [{"role": "user", "content": message.content}]
    results, texts = [], []
    for j, block in enumerate(message.content):
        at = f"{where}.content[{j}]"
        if block.type == "text":
            texts.append(block.text or "")
        elif block.type == "tool_result":
            if not block.tool_use_id:
                raise wire.APIError(f"{at}.tool_use_id: this field is required", param=at)
            content = _text_of(block.content, f"{at}.content")
            if block.is_error:
                content = json.dumps({"error": content}, ensure_ascii=False)
            results.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        else:
            raise wire.APIError(
                f"{at}: {block.type!r} blocks are not supported (text and tool_result are)",
                param=at,
            )
    text = [{"role": "user", "content": "\n".join(texts)}] if texts else []
    return [*results, *text]


def _assistant(message: _Message, where: str) -> list[dict[str, Any]]:
    """An assistant turn: its text and its ``tool_use`` blocks as calls."""
    if isinstance(message.content, str):
        return [{"role": "assistant", "content": message.content}]
    texts, calls = [], []
    for j, block in enumerate(message.content):
        at = f"{where}.content[{j}]"
        if block.type == "text":
            texts.append(block.text or "")
        elif block.type == "tool_use":
            if not block.id or not block.name:
                raise wire.APIError(f"{at}: a tool_use block needs an id and a name", param=at)
            arguments = json.dumps(block.input or {}, ensure_ascii=False)
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": arguments},
                }
            )
        elif block.type in ("thinking", "redacted_thinking"):
            continue  # an earlier turn's reasoning: not part of the conversation lokal keeps
        else:
            raise wire.APIError(
                f"{at}: {block.type!r} blocks are not supported (text and tool_use are)",
                param=at,
            )
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        out["tool_calls"] = calls
    elif not out["content"]:
        out["content"] = ""
    return [out]


def _tools(tools: list[_Tool] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    out = []
    for i, tool in enumerate(tools):
        if tool.type not in (None, "custom"):
            raise wire.APIError(
                f"tools[{i}]: Anthropic's server tool {tool.type!r} is not available here; "
                "give the tool's input_schema and run it yourself",
                param=f"tools[{i}]",
            )
        function: dict[str, Any] = {"name": tool.name}
        if tool.description is not None:
            function["description"] = tool.description
        if tool.input_schema is not None:
            function["parameters"] = tool.input_schema
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: _Choice | None) -> Any:
    if choice is None:
        return None
    if choice.type == "tool":
        if not choice.name:
            raise wire.APIError(
                "tool_choice.name: required when type is 'tool'", param="tool_choice.name"
            )
        return {"type": "function", "function": {"name": choice.name}}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def to_chat(request: CountRequest) -> dict[str, Any]:
    """The chat completions request that asks for the same reply (checked by the caller
    with ``wire.parse_data``)."""
    messages = _system(request.system)
    for i, message in enumerate(request.messages):
        where = f"messages[{i}]"
        turn = _user(message, where) if message.role == "user" else _assistant(message, where)
        messages.extend(turn)
    chat: dict[str, Any] = {"model": request.model, "messages": messages}
    tools = _tools(request.tools)
    if tools is not None:
        chat["tools"] = tools
    choice = _tool_choice(request.tool_choice)
    if choice is not None and (tools or choice == "none"):
        chat["tool_choice"] = choice
    if request.tool_choice is not None and request.tool_choice.disable_parallel_tool_use:
        chat["parallel_tool_calls"] = False
    if isinstance(request, MessagesRequest):
        chat["max_tokens"] = request.max_tokens
        for key in ("temperature", "top_p"):
            value = getattr(request, key)
            if value is not None:
                chat[key] = value
        if request.stop_sequences:
            chat["stop"] = request.stop_sequences
    return chat


def message_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]


def tool_use_id() -> str:
    return "toolu_" + uuid.uuid4().hex[:24]


def stop_reason(decision: Decision) -> str:
    """``tool_use``, ``max_tokens`` or ``end_turn``."""
    reason = wire.finish_reason(decision)
    return {"tool_calls": "tool_use", "length": "max_tokens"}.get(reason, "end_turn")


def tool_uses(decision: Decision) -> list[dict[str, Any]]:
    """The decision's calls as ``tool_use`` blocks (the ids the client answers with)."""
    return [
        {
            "type": "tool_use",
            "id": call.get("id") or tool_use_id(),
            "name": call["name"],
            "input": call.get("args") or {},
        }
        for call in decision.tool_calls
    ]


def usage(decision: Decision) -> dict[str, int]:
    return {
        "input_tokens": decision.usage.prompt_tokens or 0,
        "output_tokens": decision.usage.completion_tokens or 0,
    }


def message_response(decision: Decision, profile: Profile, ident: str) -> dict[str, Any]:
    """The Message of a decision that succeeded or stopped at ``max_tokens``."""
    content: list[dict[str, Any]] = []
    text = (
        (decision.ai_message or {}).get("content") if decision.ok else wire.unusable_text(decision)
    )
    if text:
        content.append({"type": "text", "text": text})
    if decision.ok:
        content.extend(tool_uses(decision))
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": profile.name,
        "content": content,
        "stop_reason": stop_reason(decision),
        "stop_sequence": None,
        "usage": usage(decision),
        "lokal": wire.lokal_info(decision, profile),
    }


def error_body(exc: wire.APIError) -> dict[str, Any]:
    """An error in Anthropic's shape: ``{"type": "error", "error": {type, message}}``."""
    kind = _ERROR_TYPES.get(
        exc.status, "api_error" if exc.status >= 500 else "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": exc.message}}
