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
from lokal.llm.prompts import (
    CORRECTIVE,
    EVIDENCE_LABEL,
    build_prompt_messages,
    fit_messages,
    instruction_texts,
)
from lokal.llm.quality import reply_problem, text_loop, trim_loop
from lokal.llm.select import Selection, default_selector, evidence
from lokal.llm.staged import StagedEngine, call_key, can_score
from lokal.messages import make_ai_message, read_tool_result
from lokal.schema import normalize_tools_schema, to_openai_tools

__all__ = ["DECISION_MODES", "generate_ai_message", "validate_conversation"]

DECISION_MODES = ("prompt_json", "plan_execute", "mock")
_ROLES = ("system", "user", "assistant", "tool")


class _Unusable(Exception):
    """A reply that parsed but cannot be used (wrong arguments, no tools on offer)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _BadReply(Exception):
    """A reply that parsed but is garbage: a loop, cut off, a placeholder, an echo."""


class _Ungrounded(_BadReply):
    """An answer after tool results that mentions none of their values: retried while
    attempts remain, accepted (and marked) on the last one."""


def _grounding(found: list[str] | None) -> list[str]:
    """The short values among the evidence passages (``count: 4`` gives ``4``): an answer
    after tool results should mention one of them."""
    values = []
    for passage in found or []:
        key, sep, value = passage.partition(": ")
        if key.endswith(" failed"):
            continue  # a failure may be explained in other words
        value = value.strip() if sep else passage.strip()
        if sep and 0 < len(value) <= 40:
            values.append(value)
    return values


def _check_quality(
    message: dict[str, Any],
    completion: Completion,
    grounding: list[str] | None = None,
    system: str = "",
) -> tuple[dict[str, Any], bool]:
    """The message, with a looping tail cut off (and whether it was); raise _BadReply for
    a reply that cannot be used, including an answer that copies lokal's instructions or the
    conversation's ``system`` prompt back, and one that mentions none of the ``grounding``
    values (the short results closest to the question)."""
    finish = completion.finish_reason
    if message["tool_calls"]:
        if finish in ("length", "repetition"):
            what = "repeated itself" if finish == "repetition" else "was cut off at the limit"
            raise _BadReply(f"the reply {what} inside a tool call; write shorter arguments")
        return message, False
    content = message.get("content") or ""
    if content.startswith(EVIDENCE_LABEL):  # the label lokal put before the evidence
        content = content.removeprefix(EVIDENCE_LABEL).strip()
        message = make_ai_message(content or message["content"])
    trimmed = False
    if finish == "repetition" or text_loop(content):
        kept = trim_loop(content)
        if kept is not None:
            content, trimmed, finish = kept, True, "stop"
    own = [*instruction_texts(), system] if system else instruction_texts()
    problem = reply_problem(content, finish_reason=finish, instructions=own)
    if problem:
        raise _BadReply(problem)
    folded = content.casefold()
    if grounding and not any(value.casefold() in folded for value in grounding):
        shown = "; ".join(grounding)
        raise _Ungrounded(f"the answer does not use the tool results, which say: {shown}")
    if trimmed:
        message = make_ai_message(content)
    return message, trimmed


def _preselect(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    settings: Any,
    staged: bool,
) -> Selection | None:
    """Rank the tools against the question when the profile preselects (``preselect_k``) or
    decides in stages (which reads the similarity); None otherwise."""
    if not tools or (settings.preselect_k is None and not staged):
        return None
    return default_selector().select(
        messages, tools, k=settings.preselect_k, always=settings.always
    )


def _with_generation(profile: Profile, generation: Any) -> Profile:
    return Profile(profile.name, profile.model, generation, profile.tool_calling, profile.source)


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


def _current_turn_results(messages: list[dict[str, Any]]) -> list[Any]:
    """The outputs of the ToolMessages since the last user message."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [
        read_tool_result(m).get("output")
        for m in messages[last_user + 1 :]
        if m.get("role") == "tool"
    ]


def _current_turn_done_calls(messages: list[dict[str, Any]]) -> set[str]:
    """The calls made since the last user message whose result was a success."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    turn = messages[last_user + 1 :]
    ok = {
        m.get("tool_call_id")
        for m in turn
        if m.get("role") == "tool" and read_tool_result(m)["status"] == "success"
    }
    return {
        call_key(c["name"], c.get("args") or {})
        for m in turn
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
        if c.get("id") in ok
    }


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
    return CORRECTIVE.format(error=error, how=how)


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
    # the caller's system prompt: an answer that copies it back is not an answer
    first = messages[0] if messages else {}
    system = str(first.get("content") or "") if first.get("role") == "system" else ""
    if purpose is None:
        if mode == "plan_execute":
            purpose = "step" if _current_turn_has_results(messages) else "plan"
        else:
            purpose = "decide"
    if purpose == "final":
        tools, tools_index = [], {}
    tc_mode = settings.mode
    backend = backend or get_backend(profile)
    staged = tc_mode == "staged" and can_score(backend)
    if tc_mode == "staged" and not staged:
        tc_mode = "constrained"  # a backend that cannot score: one grammar over the reply
    if not staged:
        check_mode_supported(backend, tc_mode, profile.name)
    known = tools  # a reply may call any tool of the conversation, offered or not
    selection = _preselect(messages, tools, settings, staged)
    if selection is not None:
        tools = [tool for tool in tools if tool["name"] in selection.offered]

    response_schema = None
    if tc_mode == "constrained":
        response_schema = grammar.reply_schema(tools, plan=purpose == "plan", settings=settings)
    prompt_mode = "staged" if staged else tc_mode
    found = evidence(messages, k=3) if staged else None
    prompt, dropped = _fit_prompt(backend, messages, tools, prompt_mode, purpose, profile, found)
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
        "tool_calling": "staged" if staged else tc_mode,
        "dropped_messages": dropped,
        "prompt": prompt,
    }
    if settings.mode == "staged" and not staged:
        record["fallback"] = f"backend {backend.name!r} cannot score; one grammar per reply"
    if selection is not None:
        record["selection"] = selection.to_dict()
    user_texts = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
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
        force = None
        if (
            record["attempts"]
            and record["attempts"][-1].get("error", {}).get("type") == "bad_reply"
        ):
            # the content was bad, not the choice to answer or call: keep the choice
            force = (record["attempts"][-1].get("staged") or {}).get("choice")
        attempt_started = time.perf_counter()
        attempt: dict[str, Any] = {"attempt": attempt_number + 1, "raw_text": ""}
        record["attempts"].append(attempt)
        record["prompt"] = prompt
        try:
            if staged:
                engine = StagedEngine(
                    backend,
                    request,
                    tools,
                    selection,
                    settings,
                    purpose=purpose,
                    has_results=_current_turn_has_results(messages),
                    question=user_texts[-1] if user_texts else "",
                    results=_current_turn_results(messages),
                    done=_current_turn_done_calls(messages),
                )
                completion = engine.run(force="answer" if purpose == "final" else force)
            else:
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
            details = dict(completion.details)
            if "staged" in details:
                attempt["staged"] = details.pop("staged")
            attempt["backend"] = details
        for key in ("prompt_tokens", "completion_tokens"):
            record["usage"][key] += attempt["usage"][key] or 0
        record["raw_text"] = completion.text
        try:
            message, details = _interpret(completion, known, purpose, settings)
            if tools_index or message["tool_calls"]:
                _validate_arguments(message, tools_index)
            last_attempt = attempt_number == settings.max_retries
            grounding = _grounding(found) if purpose != "final" else None
            try:
                message, trimmed = _check_quality(message, completion, grounding, system)
            except _Ungrounded:
                if not last_attempt:
                    raise
                # the model twice ignored what the tools returned: its answer is kept and the
                # passages it should have used are shown after it, marked as such
                message, trimmed = _check_quality(message, completion, None, system)
                shown = "; ".join(found or [])
                message = make_ai_message(
                    f"{message['content']}\n\n(From the tool results: {shown})"
                )
                details["grounding_appended"] = True
            if trimmed:
                details["loop_trimmed"] = True
        except ParseError as exc:
            kind = "unknown_tool" if "unknown tool" in exc.reason else "parse_error"
            attempt.update(status="error", error={"type": kind, "message": exc.reason})
        except _Unusable as exc:
            attempt.update(status="error", error={"type": exc.kind, "message": str(exc)})
        except _BadReply as exc:
            attempt.update(status="error", error={"type": "bad_reply", "message": str(exc)})
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
        if attempt["error"]["type"] == "bad_reply" and profile.generation.repeat_penalty < 1.15:
            # a loop or a copied text: retry with a repeat penalty as well as the reason
            request_settings = request.settings.model_copy(update={"repeat_penalty": 1.15})
            profile = _with_generation(profile, request_settings)
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
    found: list[str] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The prompt, with the oldest turns dropped when the backend says it would not fit."""
    budget_of = getattr(backend, "input_budget", None)
    count = getattr(backend, "count_prompt_tokens", None)
    budget = budget_of(profile.generation) if budget_of else None

    def build(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return build_prompt_messages(
            conversation, tools, mode=tc_mode, purpose=purpose, evidence=found
        )

    if budget is None or count is None:
        return build(messages), 0
    pass_tools = to_openai_tools(tools) if tools and tc_mode == "builtin" else None
    kept, dropped = fit_messages(messages, lambda c: count(build(c), pass_tools), budget)
    return build(kept), dropped


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
