"""The message contract: AIMessage, ToolCall, ToolMessage; validation; OpenAI conversion.

An AIMessage is ``{"role": "assistant", "content": str, "tool_calls": [ToolCall, ...]}``: a
final answer has content and no tool calls, a tool turn has one or more tool calls and empty
content. A ToolCall is ``{"id": str, "name": str, "args": dict}``. A ToolMessage is
``{"role": "tool", "tool_call_id", "name", "status": "success"|"error", "content"}`` where
``content`` is the JSON string of ``{"status", "output", "error"}``.

In a conversation every assistant tool call is followed, before the next user or assistant
message, by exactly one ToolMessage with its id, in call order; ``repair_conversation`` makes
a conversation so and lists what it changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from lokal.errors import MessageError

__all__ = [
    "AIMessage",
    "ToolCall",
    "ToolMessage",
    "assign_call_ids",
    "call_key",
    "current_turn",
    "decode_arguments",
    "from_openai_message",
    "from_openai_messages",
    "last_user_text",
    "make_ai_message",
    "make_tool_message",
    "read_tool_result",
    "repair_conversation",
    "to_openai_message",
    "to_openai_messages",
    "validate_ai_message",
    "validate_tool_message",
]


class ToolCall(TypedDict):
    id: str
    name: str
    args: dict[str, Any]


class AIMessage(TypedDict):
    role: Literal["assistant"]
    content: str
    tool_calls: list[ToolCall]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    name: str
    status: Literal["success", "error"]
    content: str


def call_key(name: str, args: Any) -> str:
    """A call's identity, the one place it is computed: its name and its arguments as
    canonical JSON (keys sorted). ``args`` may be the object or its JSON text; text that is
    not JSON is its own identity. Two calls with the same key are the same call (the
    runtime's repeated-call guard, the staged engine, merging within a reply)."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return name + " " + args
    return name + " " + json.dumps(args, sort_keys=True, ensure_ascii=False)


def call_id(index: int) -> str:
    """The id lokal gives the ``index``-th call (0-based) of a reply: ``call_001``, ``call_002``…"""
    return f"call_{index + 1:03d}"


def assign_call_ids(tool_calls: list[dict[str, Any]]) -> list[ToolCall]:
    """Give every call without a usable id the id ``call_NNN`` of its position; keep the others.

    Ids must be unique within a reply, so a duplicate is replaced too.
    """
    seen: set[str] = set()
    result: list[ToolCall] = []
    for index, call in enumerate(tool_calls):
        given = call.get("id")
        ident = given if isinstance(given, str) and given.strip() and given not in seen else None
        if ident is None:
            ident = call_id(index)
            while ident in seen:
                ident += "_"
        seen.add(ident)
        result.append({"id": ident, "name": call["name"], "args": call.get("args") or {}})
    return result


def make_ai_message(content: str = "", tool_calls: list[dict[str, Any]] | None = None) -> AIMessage:
    """Build and validate an AIMessage, assigning call ids where missing."""
    message: AIMessage = {
        "role": "assistant",
        "content": content,
        "tool_calls": assign_call_ids(list(tool_calls or [])),
    }
    return validate_ai_message(message)


def validate_ai_message(message: Any) -> AIMessage:
    """Check ``message`` against the AIMessage contract and return it; raise MessageError."""
    if not isinstance(message, dict):
        raise MessageError(f"an AIMessage must be an object, got {type(message).__name__}")
    if message.get("role") != "assistant":
        raise MessageError(f"an AIMessage has role 'assistant', got {message.get('role')!r}")
    content = message.get("content")
    if not isinstance(content, str):
        raise MessageError(f"AIMessage.content must be a string, got {type(content).__name__}")
    tool_calls = message.get("tool_calls")
    if not isinstance(tool_calls, list):
        raise MessageError(f"AIMessage.tool_calls must be a list, got {type(tool_calls).__name__}")
    ids: set[str] = set()
    for position, call in enumerate(tool_calls, start=1):
        where = f"tool_calls[{position - 1}]"
        if not isinstance(call, dict):
            raise MessageError(f"{where} must be an object, got {type(call).__name__}")
        name = call.get("name")
        if not isinstance(name, str) or not name.strip():
            raise MessageError(f"{where}.name must be a non-empty string, got {name!r}")
        if not isinstance(call.get("args"), dict):
            raise MessageError(
                f"{where}.args must be an object, got {type(call.get('args')).__name__}"
            )
        ident = call.get("id")
        if not isinstance(ident, str) or not ident:
            raise MessageError(f"{where}.id must be a non-empty string, got {ident!r}")
        if ident in ids:
            raise MessageError(f"{where}.id {ident!r} is used twice in one message")
        ids.add(ident)
    has_content = bool(content.strip())
    if has_content and tool_calls:
        raise MessageError("an AIMessage has either content or tool_calls, not both")
    if not has_content and not tool_calls:
        raise MessageError("an AIMessage needs content or at least one tool call")
    return message  # type: ignore[return-value]


def make_tool_message(
    call: ToolCall | dict[str, Any],
    *,
    output: Any = None,
    error: str | None = None,
) -> ToolMessage:
    """The ToolMessage answering ``call``: success with ``output``, or error with ``error``."""
    status: Literal["success", "error"] = "error" if error is not None else "success"
    body = {"status": status, "output": output, "error": error}
    return {
        "role": "tool",
        "tool_call_id": call["id"],
        "name": call["name"],
        "status": status,
        "content": json.dumps(body, ensure_ascii=False, default=str),
    }


def validate_tool_message(message: Any) -> ToolMessage:
    """Check ``message`` against the ToolMessage contract and return it; raise MessageError."""
    if not isinstance(message, dict) or message.get("role") != "tool":
        raise MessageError("a ToolMessage is an object with role 'tool'")
    for key in ("tool_call_id", "name", "content"):
        if not isinstance(message.get(key), str):
            raise MessageError(f"ToolMessage.{key} must be a string")
    if message.get("status") not in ("success", "error"):
        raise MessageError(
            f"ToolMessage.status must be 'success' or 'error', got {message.get('status')!r}"
        )
    return message  # type: ignore[return-value]


def read_tool_result(message: dict[str, Any]) -> dict[str, Any]:
    """The ``{"status", "output", "error"}`` object inside a ToolMessage's content.

    Content that is not that JSON object (a plain-text tool result from another framework) is
    returned as the output of a result whose status is the message's own.
    """
    content = message.get("content")
    status = message.get("status", "success")
    if isinstance(content, str):
        try:
            decoded = json.loads(content)
        except (json.JSONDecodeError, RecursionError):  # nested too deep: text, as it is
            decoded = None
        if isinstance(decoded, dict) and "status" in decoded:
            return {
                "status": decoded.get("status"),
                "output": decoded.get("output"),
                "error": decoded.get("error"),
            }
    return {"status": status, "output": content, "error": None}


def current_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the last user message: the turn being answered."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return messages[last_user + 1 :]


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last user message that has any: the question being answered."""
    for message in reversed(messages):
        if message.get("role") == "user" and message.get("content"):
            return str(message["content"])
    return ""


# --- OpenAI chat format ------------------------------------------------------------------


def to_openai_message(message: dict[str, Any]) -> dict[str, Any]:
    """One lokal message in OpenAI chat format (``function.arguments`` as a JSON string)."""
    role = message.get("role")
    if role == "assistant" and message.get("tool_calls"):
        return {
            "role": "assistant",
            "content": message.get("content") or None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call.get("args") or {}, ensure_ascii=False),
                    },
                }
                for call in message["tool_calls"]
            ],
        }
    if role == "assistant":
        return {"role": "assistant", "content": message.get("content", "")}
    if role == "tool":
        converted = {
            "role": "tool",
            "tool_call_id": message.get("tool_call_id", ""),
            "content": message.get("content", ""),
        }
        if message.get("name"):
            converted["name"] = message["name"]
        return converted
    return {"role": role, "content": message.get("content", "")}


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [to_openai_message(message) for message in messages]


# --- a call's arguments: the one decoder (the parser and the registry use it too) ---------

_MAX_ENCODINGS = 3  # a JSON string encoded as a JSON string ... is unwrapped this often


def decode_arguments(
    arguments: Any, repair: Callable[[str], Any] | None = None
) -> tuple[dict[str, Any], bool]:
    """Arguments as a dict and whether repair was needed; ValueError when not an object.

    ``None`` and ``""`` mean no arguments. A JSON string is decoded, also when it was encoded
    twice. ``repair`` (text -> value or None) is tried on a string that is not strict JSON.
    """
    value = arguments
    for _ in range(_MAX_ENCODINGS):
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}, False
        if isinstance(value, dict):
            return value, False
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:
            fixed = repair(value) if repair and value.strip()[:1] in "{[" else None
            if isinstance(fixed, dict):
                return fixed, True
            raise ValueError(f"arguments are not valid JSON ({exc})") from None
    raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")


def _decode_arguments(arguments: Any, where: str) -> dict[str, Any]:
    try:
        return decode_arguments(arguments)[0]
    except ValueError as exc:
        raise MessageError(f"{where}: function.arguments: {exc}") from None


def from_openai_message(message: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI chat message as a lokal message (assistant turns become AIMessages)."""
    role = message.get("role")
    if role == "assistant":
        calls = []
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            calls.append(
                {
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "args": _decode_arguments(function.get("arguments"), f"tool_calls[{index}]"),
                }
            )
        content = message.get("content") or ""
        if calls:
            # The contract keeps content and calls apart; text beside calls is a preamble.
            return make_ai_message("", calls)
        return {"role": "assistant", "content": content, "tool_calls": []}
    if role == "tool":
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        result = read_tool_result({"content": content})
        return {
            "role": "tool",
            "tool_call_id": message.get("tool_call_id", ""),
            "name": message.get("name", ""),
            "status": "error" if result.get("status") == "error" else "success",
            "content": content,
        }
    return {"role": role, "content": message.get("content") or ""}


def from_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [from_openai_message(message) for message in messages]


# --- conversation repair -----------------------------------------------------------------

NOT_RUN_ERROR = "not run: the run stopped before this call finished (no result was recorded)"


def repair_conversation(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``messages`` made a valid OpenAI conversation, and the list of repairs that took.

    Valid: every assistant tool call is followed, before the next user or assistant message,
    by exactly one ToolMessage with its id, in call order, and call ids are unique in the
    conversation. Repairs (each a dict with ``kind``, ``index``: the position in ``messages``
    of the message concerned, and the call's ``call_id`` and ``name`` where there is one):

    - ``missing_result``: a call without a ToolMessage (a run stopped or killed before the
      call finished, or a reply a guard did not run) gets an error ToolMessage saying so;
    - ``reordered``: the ToolMessages of a turn are put in call order (``call_ids`` gives the
      order they were in);
    - ``renamed_call_id``: a call whose id an earlier call already has (two runs that
      started from the same history) gets a fresh id, and so do the ToolMessages answering
      it (``was`` is the old id);
    - ``orphan_result``: a ToolMessage that answers no open call is dropped;
    - ``duplicate_result``: a second ToolMessage for one call is dropped;
    - ``empty_message``: an assistant message with neither content nor calls is dropped.

    A conversation that is already valid comes back equal, with no repairs.
    """
    all_ids = {
        call.get("id")
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    }
    seen: set[str] = set()
    id_map: dict[str, str] = {}
    kept: list[dict[str, Any]] = []
    repairs: list[dict[str, Any]] = []
    turn: list[dict[str, Any]] = []  # the calls of the open tool turn, with their fixed ids
    turn_index = -1
    results: dict[str, dict[str, Any]] = {}
    arrived: list[str] = []
    counter = len(all_ids)

    def fresh_id() -> str:
        nonlocal counter
        while call_id(counter) in all_ids or call_id(counter) in seen:
            counter += 1
        return call_id(counter)

    def close_turn() -> None:
        nonlocal turn, results, arrived
        order = [call["id"] for call in turn]
        if [i for i in arrived if i in order] != [i for i in order if i in results]:
            repairs.append({"kind": "reordered", "index": turn_index, "call_ids": list(arrived)})
        for call in turn:
            result = results.get(call["id"])
            if result is None:
                result = make_tool_message(call, error=NOT_RUN_ERROR)
                repairs.append(
                    {
                        "kind": "missing_result",
                        "index": turn_index,
                        "call_id": call["id"],
                        "name": call["name"],
                    }
                )
            kept.append(result)
        turn, results, arrived = [], {}, []

    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            raw = message.get("tool_call_id")
            ident = id_map.get(raw, raw) if isinstance(raw, str) else raw
            open_ids = {call["id"] for call in turn}
            if ident in open_ids and ident not in results:
                results[ident] = message if ident == raw else {**message, "tool_call_id": ident}
                arrived.append(ident)
            else:
                kind = "duplicate_result" if ident in open_ids else "orphan_result"
                repairs.append(
                    {"kind": kind, "index": index, "call_id": raw, "name": message.get("name")}
                )
            continue
        close_turn()
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                raw = call.get("id")
                ident = raw if isinstance(raw, str) and raw and raw not in seen else fresh_id()
                if ident != raw:
                    repairs.append(
                        {
                            "kind": "renamed_call_id",
                            "index": index,
                            "call_id": ident,
                            "was": raw,
                            "name": call.get("name"),
                        }
                    )
                if isinstance(raw, str):
                    id_map[raw] = ident
                seen.add(ident)
                calls.append(call if ident == raw else {**call, "id": ident})
            turn, turn_index = calls, index
            kept.append({**message, "tool_calls": calls})
        elif role == "assistant" and not str(message.get("content") or "").strip():
            repairs.append({"kind": "empty_message", "index": index})
        else:
            kept.append(message)
    close_turn()
    return kept, repairs
