"""generate_ai_message(): prompt → backend → parse → validate → retry → result record.

Bad model output never raises: it is a result with ``status: "error"`` and the reason, with
every attempt recorded. A caller's mistake (missing file, unknown profile, malformed
messages) raises ConfigError or MessageError with a message saying how to fix it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from lokal.config import Profile, load_profile
from lokal.errors import BackendError, ConfigError, MessageError, ParseError
from lokal.llm import grammar
from lokal.llm.backends import (
    Backend,
    Completion,
    GenerationRequest,
    check_mode_supported,
    get_backend,
)
from lokal.llm.parsing import ParseResult, coerce_args, parse_model_output, resolve_tool_name
from lokal.llm.plan import parse_plan_output
from lokal.llm.prompts import build_prompt_messages, fit_messages
from lokal.messages import make_ai_message
from lokal.schema import normalize_tools_schema, to_openai_tools

__all__ = ["DECISION_MODES", "generate_ai_message", "validate_conversation"]

DECISION_MODES = ("prompt_json", "plan_execute", "mock")
_ROLES = ("system", "user", "assistant", "tool")


class _Unusable(Exception):
    """A reply that parsed but cannot be used (wrong arguments, no tools on offer)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def validate_conversation(messages: Any) -> list[dict[str, Any]]:
    """Check the caller's messages: a list of objects with a known role and string content."""
    if not isinstance(messages, list) or not messages:
        raise MessageError("messages must be a non-empty list of {role, content} objects")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise MessageError(f"messages[{index}] must be an object")
        if message.get("role") not in _ROLES:
            raise MessageError(
                f"messages[{index}].role must be one of {', '.join(_ROLES)}, "
                f"got {message.get('role')!r}"
            )
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise MessageError(f"messages[{index}].content must be a string")
    return messages


def _current_turn_has_results(messages: list[dict[str, Any]]) -> bool:
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return any(m.get("role") == "tool" for m in messages[last_user + 1 :])


def _validate_arguments(message: dict[str, Any], tools: dict[str, dict[str, Any]]) -> None:
    if message["tool_calls"] and not tools:
        raise _Unusable("unknown_tool", "no tools are available; answer with content instead")
    for call in message["tool_calls"]:
        schema = tools[call["name"]]["parameters"]
        try:
            validator = Draft202012Validator(schema)
            error = next(iter(sorted(validator.iter_errors(call["args"]), key=str)), None)
        except SchemaError as exc:  # the tools schema itself is wrong: the caller's mistake
            raise ConfigError(
                f"tool {call['name']!r} has an invalid parameters schema: {exc}"
            ) from exc
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
            raise _Unusable(
                "invalid_arguments", f"tool {call['name']!r}, argument {where}: {error.message}"
            )


def _merge_duplicates(message: dict[str, Any]) -> tuple[dict[str, Any], int]:
    seen: set[str] = set()
    kept = []
    for call in message["tool_calls"]:
        key = call["name"] + "\x00" + repr(sorted(call["args"].items(), key=lambda kv: kv[0]))
        if key in seen:
            continue
        seen.add(key)
        kept.append(call)
    merged = len(message["tool_calls"]) - len(kept)
    if merged:
        message = make_ai_message("", [{"name": c["name"], "args": c["args"]} for c in kept])
    return message, merged


def _native_message(completion: Completion) -> dict[str, Any] | None:
    """The AIMessage from a server's native ``tool_calls``, if it sent any."""
    if not completion.native_tool_calls:
        return None
    return make_ai_message(
        "",
        [
            {"id": c.get("id"), "name": c["name"], "args": c["args"]}
            for c in completion.native_tool_calls
        ],
    )


def _corrective(error: str, mode: str) -> str:
    if mode == "builtin":
        how = "Call a tool in your native tool-call format, or answer in plain text."
    else:
        how = "Reply again with exactly one JSON object in the required format."
    return f"Your previous reply could not be used: {error}. {how}"


def _resolve_profile(
    model_config: str | Path | dict | Profile | None,
    model_name: str | None,
    tool_calling: str | None,
    mode: str,
) -> Profile:
    if isinstance(model_config, Profile):
        profile = model_config
        if tool_calling:
            profile = profile.with_tool_calling(mode=tool_calling)
    else:
        profile = load_profile(model_config, model_name, tool_calling=tool_calling)
    if mode == "mock":
        profile = profile.with_backend("mock")
    return profile


def generate_ai_message(
    model_config: str | Path | dict | Profile | None,
    messages: list[dict[str, Any]],
    tools_schema: list[dict[str, Any]] | None,
    mode: str = "prompt_json",
    model_name: str | None = None,
    tool_calling: str | None = None,
    *,
    backend: Backend | None = None,
    purpose: str | None = None,
) -> dict[str, Any]:
    """Ask the model for the next step and return the result record.

    ``mode``: ``prompt_json`` (one ReAct decision), ``plan_execute`` (a plan on the first
    turn, step decisions after tool results) or ``mock`` (the deterministic mock backend).
    ``tool_calling`` overrides the profile's ``prompt_json | builtin | constrained``.
    ``backend`` replaces the profile's backend (tests pass a ScriptedBackend).
    ``purpose="final"`` asks for a final answer with tools disabled.
    """
    if mode not in DECISION_MODES:
        raise ConfigError(f"mode must be one of {', '.join(DECISION_MODES)}, got {mode!r}")
    profile = _resolve_profile(model_config, model_name, tool_calling, mode)
    messages = validate_conversation(messages)
    tools = normalize_tools_schema(tools_schema)
    tools_index = {tool["name"]: tool for tool in tools}
    settings = profile.tool_calling
    if purpose is None:
        if mode == "plan_execute":
            purpose = "step" if _current_turn_has_results(messages) else "plan"
        else:
            purpose = "decide"
    if purpose == "final":
        tools, tools_index = [], {}
    tc_mode = settings.mode
    backend = backend or get_backend(profile)
    check_mode_supported(backend, tc_mode, profile.name)

    response_schema = None
    if tc_mode == "constrained":
        response_schema = grammar.reply_schema(tools, plan=purpose == "plan", settings=settings)
    prompt, dropped = _fit_prompt(backend, messages, tools, tc_mode, purpose, profile)
    record: dict[str, Any] = {
        "status": "error",
        "ai_message": None,
        "raw_text": "",
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "latency_ms": 0.0,
        "parse": {"format": None, "repaired": False, "attempts": 0},
        "attempts": [],
        "error": None,
        "model": {
            "profile": profile.name,
            "display_name": profile.display_name,
            "backend": backend.name,
        },
        "mode": mode,
        "purpose": purpose,
        "tool_calling": tc_mode,
        "dropped_messages": dropped,
        "prompt": prompt,
    }
    started = time.perf_counter()
    for attempt_number in range(settings.max_retries + 1):
        request = GenerationRequest(
            messages=prompt,
            settings=profile.generation,
            tools=to_openai_tools(tools) if tools else None,
            pass_tools=tc_mode == "builtin",
            response_schema=response_schema,
            purpose=purpose,
            conversation=messages,
        )
        attempt_started = time.perf_counter()
        attempt: dict[str, Any] = {"attempt": attempt_number + 1, "raw_text": ""}
        record["attempts"].append(attempt)
        record["prompt"] = prompt
        try:
            completion = backend.generate(request)
        except BackendError as exc:
            attempt.update(status="error", error={"type": "backend_error", "message": str(exc)})
            record["error"] = attempt["error"]
            break
        attempt["latency_ms"] = round((time.perf_counter() - attempt_started) * 1000, 1)
        attempt["raw_text"] = completion.text
        attempt["usage"] = {
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
        }
        attempt["finish_reason"] = completion.finish_reason
        if completion.details:
            attempt["backend"] = completion.details
        for key in ("prompt_tokens", "completion_tokens"):
            record["usage"][key] += attempt["usage"][key] or 0
        record["raw_text"] = completion.text
        try:
            message, details = _interpret(completion, tools, purpose, settings)
            if tools_index or message["tool_calls"]:
                _validate_arguments(message, tools_index)
        except ParseError as exc:
            kind = "unknown_tool" if "unknown tool" in exc.reason else "parse_error"
            attempt.update(status="error", error={"type": kind, "message": exc.reason})
        except _Unusable as exc:
            attempt.update(status="error", error={"type": exc.kind, "message": str(exc)})
        else:
            merged = 0
            if settings.merge_duplicate_calls and message["tool_calls"]:
                message, merged = _merge_duplicates(message)
            details["merged_duplicates"] = merged
            attempt.update(status="success", format=details.get("format"))
            record.update(status="success", ai_message=message, error=None)
            record["parse"] = {**details, "attempts": attempt_number + 1}
            break
        record["error"] = attempt["error"]
        prompt = [
            *prompt,
            {"role": "assistant", "content": completion.text},
            {"role": "user", "content": _corrective(attempt["error"]["message"], tc_mode)},
        ]
    if record["status"] != "success":
        record["parse"]["attempts"] = len(record["attempts"])
    record["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return record


def _fit_prompt(
    backend: Backend,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    tc_mode: str,
    purpose: str,
    profile: Profile,
) -> tuple[list[dict[str, Any]], int]:
    """The prompt, with the oldest turns dropped when the backend says it would not fit."""
    budget_of = getattr(backend, "input_budget", None)
    count = getattr(backend, "count_prompt_tokens", None)
    budget = budget_of(profile.generation) if budget_of else None
    if budget is None or count is None:
        return build_prompt_messages(messages, tools, mode=tc_mode, purpose=purpose), 0
    pass_tools = to_openai_tools(tools) if tools and tc_mode == "builtin" else None

    def size(conversation: list[dict[str, Any]]) -> int:
        prompt = build_prompt_messages(conversation, tools, mode=tc_mode, purpose=purpose)
        return count(prompt, pass_tools)

    kept, dropped = fit_messages(messages, size, budget)
    return build_prompt_messages(kept, tools, mode=tc_mode, purpose=purpose), dropped


def _interpret(
    completion: Completion,
    tools: list[dict[str, Any]],
    purpose: str,
    settings: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Turn one completion into an AIMessage and the parse details; raise ParseError."""
    native = _native_message(completion)
    if native is not None:
        # Native calls still go through the parser's name and type checks.
        index = {tool["name"]: tool for tool in tools}
        calls = []
        for call in native["tool_calls"]:
            name = resolve_tool_name(call["name"], index) if index else call["name"]
            args = coerce_args(call["args"], index[name]["parameters"]) if index else call["args"]
            calls.append({"id": call["id"], "name": name, "args": args})
        preamble = completion.text.strip()
        return make_ai_message("", calls), {
            "format": "native",
            "repaired": False,
            "preamble": preamble,
            "conflict": bool(preamble),
        }
    if purpose == "plan":
        message, plan = parse_plan_output(
            completion.text, tools or None, conflict_policy=settings.conflict_policy
        )
        return message, {"format": plan["format"], "repaired": plan["repaired"], "plan": plan}
    result: ParseResult = parse_model_output(
        completion.text,
        tools or None,
        conflict_policy=settings.conflict_policy,
        calls_in_think=settings.calls_in_think,
    )
    if purpose == "final" and result.message["tool_calls"]:
        raise ParseError("tools are disabled for the final answer; answer in plain text")
    return result.message, {
        "format": result.format,
        "repaired": result.repaired,
        "preamble": result.preamble,
        "reasoning": result.reasoning,
        "conflict": result.conflict,
        "dropped_calls": result.dropped_calls,
    }
