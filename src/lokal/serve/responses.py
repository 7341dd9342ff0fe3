"""OpenAI's Responses API on the wire: a request read into a chat completions request (one
set of checks, one decision engine, one queue with chat), a decision written as a Response
object, and the stream's events.

Supported: ``input`` as text or items (messages with text parts, ``function_call``,
``function_call_output``), ``instructions``, function ``tools`` and ``tool_choice``
(``auto`` / ``none`` / ``required`` / a named function / ``allowed_tools``), ``text.format``
(``text``, ``json_object``, ``json_schema``), ``parallel_tool_calls``,
``max_output_tokens``, ``temperature``, ``top_p``, ``store`` and ``previous_response_id``
(``lokal.memory.responses``), ``stream``. Built-in tools (web search, file search, computer
use ...), images and files are refused with a 400 naming the field.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lokal.config import Profile
from lokal.records import Decision
from lokal.serve import wire

__all__ = [
    "ResponsesRequest",
    "conversation_after",
    "function_call_item",
    "message_item",
    "output_items",
    "response_id",
    "response_object",
    "to_chat",
]


class _Model(BaseModel):
    # unknown fields (metadata, include, reasoning, truncation ...) are accepted and ignored
    model_config = ConfigDict(strict=True, extra="allow")


class _Part(_Model):
    type: str
    text: str | None = None


class Item(_Model):
    type: str | None = None  # "message" when absent and a role is given
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: str | list[_Part] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | list[_Part] | None = None


class _Tool(_Model):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class _Format(_Model):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None
    description: str | None = None


class _Text(_Model):
    format: _Format | None = None


class ResponsesRequest(_Model):
    """``POST /v1/responses``."""

    model: str
    input: str | list[Item]
    instructions: str | None = None
    tools: list[_Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    text: _Text | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    store: bool | None = None
    previous_response_id: str | None = None
    stream: bool | None = None
    metadata: dict[str, Any] | None = None
    user: str | None = Field(None, max_length=200)


def _text(content: str | list[_Part] | None, where: str) -> str:
    """The text of a message's content or a call's output (text parts only)."""
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for j, part in enumerate(content):
        if part.type not in ("input_text", "output_text", "text"):
            raise wire.APIError(
                f"{where}[{j}]: only text parts are supported, got {part.type!r}",
                param=f"{where}[{j}]",
            )
        texts.append(part.text or "")
    return "".join(texts)


def _items(items: list[Item]) -> list[dict[str, Any]]:
    """Input items as chat messages (consecutive ``function_call`` items are one assistant
    message with their calls)."""
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        kind = item.type or ("message" if item.role else None)
        if kind == "message":
            if item.role is None:
                raise wire.APIError(f"{where}.role: this field is required", param=f"{where}.role")
            messages.append({"role": item.role, "content": _text(item.content, f"{where}.content")})
        elif kind == "function_call":
            if not item.call_id or not item.name:
                raise wire.APIError(f"{where}: a function_call needs call_id and name", param=where)
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments or "{}"},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if not item.call_id:
                raise wire.APIError(f"{where}.call_id: this field is required", param=where)
            output = _text(item.output, f"{where}.output")
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": output})
        elif kind == "reasoning":
            continue  # an earlier turn's reasoning: lokal keeps none
        else:
            raise wire.APIError(
                f"{where}.type: {kind!r} items are not supported (message, function_call, "
                "function_call_output are)",
                param=f"{where}.type",
            )
    return messages


def _tools(tools: list[_Tool] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    out = []
    for i, tool in enumerate(tools):
        if tool.type != "function":
            raise wire.APIError(
                f"tools[{i}].type: the built-in tool {tool.type!r} is not available here; "
                "give a function tool and run it yourself",
                param=f"tools[{i}].type",
            )
        function: dict[str, Any] = {"name": tool.name or ""}
        for key in ("description", "parameters", "strict"):
            value = getattr(tool, key)
            if value is not None:
                function[key] = value
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: str | dict[str, Any] | None) -> Any:
    """The Responses ``tool_choice`` in chat's form (chat's checks then apply)."""
    if choice is None or isinstance(choice, str):
        return choice
    if choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if choice.get("type") == "allowed_tools":
        named = [
            {"type": "function", "function": {"name": t.get("name")}}
            for t in choice.get("tools") or []
        ]
        return {
            "type": "allowed_tools",
            "allowed_tools": {"mode": choice.get("mode"), "tools": named},
        }
    raise wire.APIError(
        f"tool_choice: {choice.get('type')!r} is not supported (a function or allowed_tools is)",
        param="tool_choice",
    )


def _format(text: _Text | None) -> dict[str, Any] | None:
    form = text.format if text is not None else None
    if form is None or form.type == "text":
        return None
    if form.type == "json_object":
        return {"type": "json_object"}
    if form.schema_ is None:
        raise wire.APIError(
            "text.format.schema: required when type is json_schema", param="text.format.schema"
        )
    schema: dict[str, Any] = {"name": form.name or "answer", "schema": form.schema_}
    if form.strict is not None:
        schema["strict"] = form.strict
    return {"type": "json_schema", "json_schema": schema}


def to_chat(request: ResponsesRequest, previous: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat completions request that asks for the same reply: the stored conversation of
    ``previous_response_id`` (``previous``), the instructions (not carried over from a
    previous response, as OpenAI's API does), then the input."""
    system = [{"role": "system", "content": request.instructions}] if request.instructions else []
    given = (
        [{"role": "user", "content": request.input}]
        if isinstance(request.input, str)
        else _items(request.input)
    )
    chat: dict[str, Any] = {"model": request.model, "messages": [*system, *previous, *given]}
    tools = _tools(request.tools)
    if tools is not None:
        chat["tools"] = tools
    choice = _tool_choice(request.tool_choice)
    if choice is not None:
        chat["tool_choice"] = choice
    form = _format(request.text)
    if form is not None:
        chat["response_format"] = form
    if request.max_output_tokens is not None:
        chat["max_tokens"] = request.max_output_tokens
    for key in ("temperature", "top_p", "parallel_tool_calls"):
        value = getattr(request, key)
        if value is not None:
            chat[key] = value
    return chat


def response_id() -> str:
    return "resp_" + uuid.uuid4().hex[:24]


def message_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_" + uuid.uuid4().hex[:24],
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def function_call_item(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + uuid.uuid4().hex[:24],
        "call_id": call["id"],
        "name": call["function"]["name"],
        "arguments": call["function"]["arguments"],
        "status": "completed",
    }


def output_items(decision: Decision) -> list[dict[str, Any]]:
    """A decision's output: its text as a message item, its calls as function_call items."""
    text = (
        (decision.ai_message or {}).get("content") if decision.ok else wire.unusable_text(decision)
    )
    items = [message_item(text)] if text else []
    if decision.ok:
        items += [function_call_item(call) for call in wire.openai_tool_calls(decision)]
    return items


def usage(decision: Decision) -> dict[str, Any]:
    prompt = decision.usage.prompt_tokens or 0
    completion = decision.usage.completion_tokens or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def response_object(
    request: ResponsesRequest,
    ident: str,
    created: float,
    *,
    status: str = "completed",
    output: list[dict[str, Any]] | None = None,
    decision: Decision | None = None,
    profile: Profile | None = None,
) -> dict[str, Any]:
    """The Response object: ``in_progress`` (the stream's first events, no decision yet),
    ``completed``, or ``incomplete`` (cut at ``max_output_tokens``)."""
    form = (
        request.text.format.model_dump(by_alias=True, exclude_none=True)
        if request.text and request.text.format
        else {"type": "text"}
    )
    body: dict[str, Any] = {
        "id": ident,
        "object": "response",
        "created_at": int(created),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "model": request.model,
        "output": output or [],
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "previous_response_id": request.previous_response_id,
        "store": request.store is not False,
        "temperature": request.temperature,
        "text": {"format": form},
        "tool_choice": request.tool_choice or "auto",
        "tools": [t.model_dump(exclude_none=True) for t in request.tools or []],
        "top_p": request.top_p,
        "truncation": "disabled",
        "usage": None,
        "user": request.user,
        "metadata": request.metadata or {},
    }
    if decision is not None:
        if wire.finish_reason(decision) == "length":
            body["status"] = "incomplete"
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        body["usage"] = usage(decision)
        if profile is not None:
            body["lokal"] = wire.lokal_info(decision, profile)
    return body


def conversation_after(
    request: ResponsesRequest, chat: dict[str, Any], output: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation a stored response ends: the chat messages it was asked with (without
    its instructions, which a next request does not inherit), then its output."""
    asked = list(chat["messages"][1:] if request.instructions else chat["messages"])
    reply: dict[str, Any] = {"role": "assistant", "content": None}
    for item in output:
        if item["type"] == "message":
            reply["content"] = item["content"][0]["text"]
        else:
            call = {"name": item["name"], "arguments": item["arguments"]}
            reply.setdefault("tool_calls", []).append(
                {"id": item["call_id"], "type": "function", "function": call}
            )
    if reply["content"] is None and not reply.get("tool_calls"):
        reply["content"] = ""
    return [*asked, reply]
