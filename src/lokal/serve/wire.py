"""The wire format of ``lokal serve``: OpenAI's chat-completions request, checked field by
field, turned into what ``generate_ai_message`` takes; a Decision turned into OpenAI's reply;
and OpenAI's error shape.

Every problem with a request is an ``APIError`` (400 unless said otherwise) whose ``param``
names the field (``messages[2].tool_call_id``, ``tools[0]``), as OpenAI's API words it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lokal.config import GenerationSettings, Profile
from lokal.errors import ConfigError, MessageError
from lokal.messages import from_openai_message, read_tool_result, repair_conversation
from lokal.records import Decision
from lokal.tools.schema import tool_specs

__all__ = [
    "APIError",
    "ChatRequest",
    "Prepared",
    "completion_response",
    "error_body",
    "finish_reason",
    "lokal_info",
    "new_call_id",
    "openai_tool_calls",
    "parse_request",
    "prepare",
]

# a pairing problem in the caller's messages (the other repairs are harmless and applied)
_PAIRING = {
    "missing_result": "tool call {call_id!r} ({name}) has no tool message answering it",
    "orphan_result": "tool message with tool_call_id {call_id!r} answers no tool call of the "
    "assistant message before it",
    "duplicate_result": "a second tool message answers tool call {call_id!r}",
}


class APIError(Exception):
    """An error reply in OpenAI's shape: ``{"error": {message, type, param, code}}``."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        type: str = "invalid_request_error",
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.type = type
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    @classmethod
    def server(cls, message: str, code: str) -> APIError:
        """A 500 the SDKs do not retry (``x-should-retry: false``): retrying cannot help."""
        return cls(
            message,
            status=500,
            type="server_error",
            code=code,
            headers={"x-should-retry": "false"},
        )


def error_body(
    message: str, type: str = "invalid_request_error", param: str | None = None, code: Any = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# --- the request ------------------------------------------------------------------------


MAX_CHOICES = 8  # n: choices a chat completion may ask for


class _Model(BaseModel):
    # strict: "1" is not an integer and "true" not a boolean; unknown fields (user, metadata,
    # logprobs, store ...) are accepted and ignored, as OpenAI-compatible servers do
    model_config = ConfigDict(strict=True, extra="allow")


# The JSON Schemas below (app.openapi(), which the fuzz tests generate requests from) also
# state the rules the handler checks after the models: each role's required fields, text
# parts only. Validation itself is the models' and prepare's, with their messages.


def _text_parts_only(schema: dict[str, Any]) -> None:
    schema["properties"]["type"] = {"const": "text", "title": "Type", "type": "string"}
    schema["properties"]["text"] = {"title": "Text", "type": "string"}
    schema["required"] = ["type", "text"]


def _fields_by_role(schema: dict[str, Any]) -> None:
    text = {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "minItems": 1}]}
    schema["anyOf"] = [
        {
            "properties": {"role": {"enum": ["system", "developer", "user"]}},
            "required": ["content"],
            "not": {"properties": {"content": {"type": "null"}}},
        },
        {
            "properties": {"role": {"const": "assistant"}, "content": text},
            "required": ["content"],
        },
        {
            "properties": {
                "role": {"const": "assistant"},
                "tool_calls": {"type": "array", "minItems": 1},
            },
            "required": ["tool_calls"],
        },
        {
            "properties": {"role": {"const": "tool"}, "tool_call_id": {"minLength": 1}},
            "required": ["tool_call_id"],
        },
    ]


class _Part(_Model):
    model_config = ConfigDict(json_schema_extra=_text_parts_only)

    type: str
    text: str | None = None


class _Function(_Model):
    name: str
    arguments: str | None = None


class _ToolCall(_Model):
    id: str
    type: Literal["function"] = "function"
    function: _Function


class Message(_Model):
    model_config = ConfigDict(json_schema_extra=_fields_by_role)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[_Part] | None = None
    name: str | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None


class _FunctionDef(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Model):
    type: Literal["function"]
    function: _FunctionDef


class _Named(_Model):
    name: str


class NamedChoice(_Model):
    type: Literal["function"]
    function: _Named


class _AllowedEntry(_Model):
    type: Literal["function"] = "function"
    function: _Named


class _Allowed(_Model):
    mode: Literal["auto", "required"]
    tools: list[_AllowedEntry] = Field(min_length=1)


class AllowedToolsChoice(_Model):
    type: Literal["allowed_tools"]
    allowed_tools: _Allowed


class _JsonSchema(_Model):
    name: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None


class ResponseFormat(_Model):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: _JsonSchema | None = None


class StreamOptions(_Model):
    include_usage: bool | None = None


class ChatRequest(_Model):
    model: str
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedChoice | AllowedToolsChoice | None = (
        None
    )
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    response_format: ResponseFormat | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1, le=MAX_CHOICES)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    user: str | None = Field(None, max_length=200)  # names the conversation a run is kept in


def _param(loc: tuple[Any, ...]) -> str:
    """A pydantic location as OpenAI names a field: ``messages[0].content``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "list[_Part]", "function-after", "none") or "[" in str(part):
            continue  # the branch of a union pydantic tried, not a field
        elif part in ("NamedChoice", "AllowedToolsChoice", "literal['none','auto','required']"):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "body"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unencodable(value: Any) -> str | None:
    """Where in ``value`` (``".messages[0].content"``; ``""``: itself; for a key, the object
    holding it) there is text that UTF-8 cannot encode, or None. Such text is a lone
    surrogate: JSON's ``"\\ud800"`` decodes to one, and SQLite, the log, the traces and a
    model's tokenizer all fail on it."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:  # depth-first in document order, without recursion (JSON may nest deep)
        where, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return where
        elif isinstance(item, dict):
            if any(_SURROGATE.search(str(key)) for key in item):
                return where
            stack.extend((f"{where}.{key}", sub) for key, sub in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
    return None


MAX_SCHEMA_DEPTH = 64  # objects and arrays inside one another in a tool's or reply's schema


def _depth(value: Any) -> int:
    """How deep objects and arrays nest in ``value`` (counted without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend(
                (sub, level + 1) for sub in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def _check_schema_depth(schema: Any, param: str) -> None:
    """APIError naming ``param`` for a schema nested deeper than any tool needs: the schema
    checks, the grammar and the prompt all walk it recursively."""
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise APIError(
            f"{param}: the schema nests objects and arrays more than {MAX_SCHEMA_DEPTH} deep",
            param=param,
        )


def _check_text(value: Any, param: str, *, decoded: bool = False) -> None:
    """APIError naming the field when ``value`` holds text UTF-8 cannot encode (the message
    never quotes the text: it could not be sent either). ``decoded``: ``value`` was decoded
    from the JSON text of field ``param``, which is then the name given."""
    where = _unencodable(value)
    if where is None:
        return
    name = param if decoded else (param + where).lstrip(".") or "body"
    raise APIError(
        f"{name}: the text is not valid Unicode (a lone surrogate such as \\ud800, which "
        "UTF-8 cannot encode)",
        param=name,
    )


def parse_request(body: bytes) -> ChatRequest:
    """The request, checked; APIError naming the first bad field."""
    return parse_data(read_json(body))


def read_json(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object, its text checked; APIError when it is not one."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise APIError(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise APIError("the request body must be a JSON object")
    _check_text(data, "")
    return data


def validate(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """``data`` as ``model``; APIError naming the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = min(errors, key=lambda e: len(e["loc"]))  # the outermost (a union's branches)
        param = _param(tuple(first["loc"]))
        what = first["msg"]
        if first["type"] == "missing":
            what = "this field is required"
        raise APIError(f"{param}: {what}", param=param) from None


def parse_data(data: dict[str, Any]) -> ChatRequest:
    """A chat completions request from its decoded JSON, checked (the Anthropic and
    Responses routes translate their requests into one)."""
    _check_text(data, "")
    return validate(ChatRequest, data)


# --- the request → a decision -----------------------------------------------------------


@dataclass
class Prepared:
    """What the decision is made from."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice: Any
    parallel_tool_calls: bool
    response_format: dict[str, Any] | None
    generation: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False
    n: int = 1  # choices: each a reply of its own, drawn with the seed + its index


def _text(content: str | list[_Part] | None, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        if part.type != "text" or part.text is None:
            raise APIError(
                f"{where}[{j}]: only text parts are supported, got {part.type!r}",
                param=f"{where}[{j}]",
            )
        texts.append(part.text)
    return "".join(texts)


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> tool name, to name the tool messages
    for i, message in enumerate(request.messages):
        where = f"messages[{i}]"
        content = _text(message.content, f"{where}.content")
        role = "system" if message.role == "developer" else message.role
        raw: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant" and message.tool_calls:
            raw["tool_calls"] = [call.model_dump() for call in message.tool_calls]
            for call in message.tool_calls:
                names[call.id] = call.function.name
        elif role == "assistant" and not content:
            raise APIError(
                f"{where}: an assistant message needs content or tool_calls", param=where
            )
        if role == "tool":
            if not message.tool_call_id:
                raise APIError(
                    f"{where}.tool_call_id: a tool message needs the id of the call it answers",
                    param=f"{where}.tool_call_id",
                )
            raw["tool_call_id"] = message.tool_call_id
            raw["name"] = message.name or names.get(message.tool_call_id, "")
            raw["content"] = content or ""
        if role in ("user", "system") and content is None:
            raise APIError(f"{where}.content: this field is required", param=f"{where}.content")
        try:
            converted.append(from_openai_message(raw))
        except MessageError as exc:
            raise APIError(f"{where}.{exc}", param=f"{where}.tool_calls") from None
        # text decoded from JSON inside a string (arguments, a tool's result) is checked too
        for j, call in enumerate(converted[-1].get("tool_calls") or []):
            param = f"{where}.tool_calls[{j}].function.arguments"
            _check_text(call.get("args"), param, decoded=True)
        if role == "tool":
            _check_text(read_tool_result(converted[-1]), f"{where}.content", decoded=True)
    kept, repairs = repair_conversation(converted)
    for repair in repairs:
        wording = _PAIRING.get(repair["kind"])
        if wording is not None:
            where = f"messages[{repair['index']}]"
            message = wording.format(call_id=repair.get("call_id"), name=repair.get("name"))
            raise APIError(f"{where}: {message}", param=where)
    return kept


def _tools(request: ChatRequest) -> list[dict[str, Any]]:
    tools = []
    seen: set[str] = set()
    for i, tool in enumerate(request.tools or []):
        entry = tool.model_dump(exclude_none=True)
        name = tool.function.name
        if name in seen:
            raise APIError(f"tools[{i}]: a second tool named {name!r}", param=f"tools[{i}]")
        seen.add(name)
        _check_schema_depth(tool.function.parameters, f"tools[{i}].function.parameters")
        try:
            tool_specs([entry])
        except ConfigError as exc:
            param = f"tools[{i}].function.parameters"
            raise APIError(f"{param}: {exc}", param=param) from None
        tools.append(entry)
    return tools


def _tool_choice(request: ChatRequest, tools: list[dict[str, Any]]) -> Any:
    choice = request.tool_choice
    if choice is None or isinstance(choice, str):
        if choice == "required" and not tools:
            raise APIError("tool_choice: 'required' needs tools", param="tool_choice")
        return choice
    names = {tool["function"]["name"] for tool in tools}
    wanted = (
        [choice.function.name]
        if isinstance(choice, NamedChoice)
        else [entry.function.name for entry in choice.allowed_tools.tools]
    )
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise APIError(
            f"tool_choice: {', '.join(map(repr, unknown))} is not among the tools "
            f"({', '.join(sorted(names)) or 'none given'})",
            param="tool_choice",
        )
    return choice.model_dump()


def _response_format(request: ChatRequest) -> dict[str, Any] | None:
    form = request.response_format
    if form is None or form.type == "text":
        return None
    if form.type == "json_object":
        return {"type": "json_object"}
    if form.json_schema is None:
        raise APIError(
            "response_format.json_schema: required when type is json_schema",
            param="response_format.json_schema",
        )
    from jsonschema.exceptions import SchemaError

    from lokal.tools.schema import check_json_schema, check_local_refs

    param = "response_format.json_schema.schema"
    _check_schema_depth(form.json_schema.schema_, param)
    try:
        check_json_schema(form.json_schema.schema_)
        check_local_refs(form.json_schema.schema_, param)
    except SchemaError as exc:
        raise APIError(f"{param}: not a JSON Schema: {exc.message}", param=param) from None
    except ConfigError as exc:
        raise APIError(str(exc), param=param) from None
    return {"type": "json_schema", "json_schema": {"schema": form.json_schema.schema_}}


_GENERATION_FIELDS = {
    "max_new_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "stop": "stop",
}


def _generation(request: ChatRequest, profile: Profile) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    limit = request.max_completion_tokens or request.max_tokens
    if limit is not None:
        changes["max_new_tokens"] = limit
    for key in ("temperature", "top_p", "seed"):
        value = getattr(request, key)
        if value is not None:
            changes[key] = value
    if request.stop is not None:
        changes["stop"] = (request.stop,) if isinstance(request.stop, str) else tuple(request.stop)
    if request.top_logprobs is not None and not request.logprobs:
        raise APIError("top_logprobs: needs logprobs: true", param="top_logprobs")
    if request.logprobs:
        changes["logprobs"] = request.top_logprobs or 0
    if changes:
        try:
            GenerationSettings.model_validate({**profile.generation.model_dump(), **changes})
        except ValidationError as exc:
            key = str(exc.errors()[0]["loc"][0])
            param = _GENERATION_FIELDS.get(key, key)
            raise APIError(f"{param}: {exc.errors()[0]['msg']}", param=param) from None
    return changes


def prepare(request: ChatRequest, profile: Profile) -> Prepared:
    """The decision's inputs from a checked request; APIError naming the field."""
    n = request.n or 1
    if n > 1 and request.stream:
        raise APIError(
            "n: several choices are not streamed; ask for them without stream", param="n"
        )
    tools = _tools(request)
    return Prepared(
        messages=_messages(request),
        tools=tools,
        tool_choice=_tool_choice(request, tools),
        parallel_tool_calls=request.parallel_tool_calls is not False,
        response_format=_response_format(request),
        generation=_generation(request, profile),
        stream=bool(request.stream),
        include_usage=bool(request.stream_options and request.stream_options.include_usage),
        n=n,
    )


# --- a decision → the reply --------------------------------------------------------------


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def openai_tool_calls(decision: Decision) -> list[dict[str, Any]]:
    """The decision's calls in OpenAI form, under their ids (``lokal serve`` gives them
    fresh ``call_...`` ids, unique across conversations, before a reply is recorded) and
    ``arguments`` always a JSON object string (``"{}"`` when empty)."""
    return [
        {
            "id": call.get("id") or new_call_id(),
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call.get("args") or {}, ensure_ascii=False),
            },
        }
        for call in decision.tool_calls
    ]


def finish_reason(decision: Decision) -> str:
    if decision.ok and decision.tool_calls:
        return "tool_calls"
    last = decision.attempts[-1].finish_reason if decision.attempts else None
    return "length" if last == "length" else "stop"


def lokal_info(decision: Decision, profile: Profile) -> dict[str, Any]:
    """The extra ``lokal`` object of a reply (OpenAI clients ignore it)."""
    parse = decision.parse or {}
    info: dict[str, Any] = {
        "status": decision.status,
        "attempts": len(decision.attempts),
        "format": parse.get("format"),
        "repaired": bool(parse.get("repaired")),
        "profile": profile.name,
        "tool_calling": decision.tool_calling,
    }
    if parse.get("answer_source"):  # model, quoted or extracted (lokal.runtime)
        info["answer_source"] = parse["answer_source"]
    if parse.get("checks"):
        info["checks"] = parse["checks"]
    if parse.get("dropped_calls"):
        info["dropped_calls"] = parse["dropped_calls"]
    if parse.get("server_tools"):
        info["server_tools"] = parse["server_tools"]
    if decision.error is not None:
        info["error"] = decision.error.to_dict()
    return info


def usage(decision: Decision) -> dict[str, int]:
    prompt = decision.usage.prompt_tokens or 0
    completion = decision.usage.completion_tokens or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def unusable_text(decision: Decision) -> str:
    """What an error decision cut off at the token limit had written as an answer."""
    text = decision.raw_text.strip()
    try:
        from pydantic_core import from_json

        value = from_json(text, allow_partial="trailing-strings")
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            return value["content"]
    except ValueError:
        pass
    return text


def content_logprobs(decision: Decision) -> dict[str, Any] | None:
    """The reply's ``logprobs`` (OpenAI's ``{"content": [...], "refusal": None}``) when they
    were asked for: the generated tokens of the answer's text (those of lokal's envelope
    around it left out); ``content: None`` for a reply of calls, or when the answer is not
    the generated text as written (an extracted passage, a staged reply built in steps)."""
    attempt = decision.attempts[-1] if decision.attempts else None
    entries = (attempt.backend or {}).get("logprobs") if attempt is not None else None
    if entries is None:
        return None
    content = (decision.ai_message or {}).get("content") if decision.ok else unusable_text(decision)
    if not content or (decision.ok and decision.tool_calls):
        return {"content": None, "refusal": None}
    text = "".join(entry["token"] for entry in entries)
    start = text.find(content)
    if start < 0:
        return {"content": None, "refusal": None}
    end, kept, offset = start + len(content), [], 0
    for entry in entries:
        if offset < end and offset + len(entry["token"]) > start:
            kept.append(entry)
        offset += len(entry["token"])
    return {"content": kept, "refusal": None}


def completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def _choice(decision: Decision, index: int) -> dict[str, Any]:
    tool_calls = openai_tool_calls(decision) if decision.ok else []
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    elif decision.ok:
        message["content"] = (decision.ai_message or {}).get("content", "")
    else:
        message["content"] = unusable_text(decision)
    return {
        "index": index,
        "message": message,
        "logprobs": content_logprobs(decision),
        "finish_reason": finish_reason(decision),
    }


def completion_response(
    decision: Decision, profile: Profile, ident: str, others: list[Decision] | None = None
) -> dict[str, Any]:
    """The non-streamed reply (``decision`` succeeded, or stopped at the token limit);
    ``others``: the further choices of a request with ``n > 1`` (their tokens count in
    ``usage``)."""
    decisions = [decision, *(others or [])]
    spent = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for each in decisions:
        for key, value in usage(each).items():
            spent[key] += value
    return {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": profile.name,
        "system_fingerprint": None,
        "choices": [_choice(each, index) for index, each in enumerate(decisions)],
        "usage": spent,
        "lokal": lokal_info(decision, profile),
    }
