"""The request of a decision, resolved once: what ``generate_ai_message`` was asked.

``resolve_request`` translates everything a caller may pass (a profile or model.yaml, the
legacy ``mode``, OpenAI's ``tool_choice`` and ``response_format``, ``parallel_tool_calls``,
a strategy and a purpose) into one ``DecisionRequest``: the profile, the tools on offer and
the tools a reply may name, the choice left (``none | auto | required``), the answer schema,
the strategy, the purpose, the tool-calling axis (``staged`` falls back to ``constrained`` on
a backend that cannot score), the preselection, the grammar, the prompt, and what the reply
checks read (the question, the evidence, the answer context). Nothing here calls the model;
``lokal.llm.attempts`` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lokal.config import (
    STRATEGIES,
    Profile,
    ToolCallingSettings,
    from_legacy_mode,
    load_profile,
)
from lokal.errors import ConfigError, MessageError
from lokal.llm import grammar
from lokal.llm.backends import Backend, check_mode_supported, get_backend
from lokal.llm.checks import AnswerContext, note_lines
from lokal.llm.evidence import evidence
from lokal.llm.prompts import build_prompt_messages, fit_messages
from lokal.llm.select import Selection, default_selector
from lokal.llm.signals import file_searches
from lokal.llm.staged import can_score, does_arithmetic
from lokal.llm.staged.candidates import refers_back
from lokal.messages import call_key, current_turn, last_user_text, read_tool_result
from lokal.tools.schema import (
    ToolSpec,
    check_json_schema,
    check_local_refs,
    openai_tools,
    tool_specs,
)

__all__ = [
    "DecisionRequest",
    "done_calls",
    "resolve_request",
    "turn_results",
    "validate_conversation",
]

_ROLES = ("system", "user", "assistant", "tool")


@dataclass
class DecisionRequest:
    """One decision's request, every option resolved."""

    profile: Profile
    messages: list[dict[str, Any]]
    strategy: str
    purpose: str  # decide | plan | step | final
    tools: list[ToolSpec]  # the tools on offer (after preselection)
    known: list[ToolSpec]  # the tools a reply may name (offered or not)
    call_required: bool
    one_call: bool  # parallel_tool_calls=False
    answer_schema: dict[str, Any] | None
    settings: ToolCallingSettings
    tc_mode: str  # the tool-calling axis actually used
    staged: bool
    backend: Backend
    selection: Selection | None
    wire_tools: list[dict[str, Any]] | None
    response_schema: dict[str, Any] | None
    found: list[str] | None  # the evidence passages shown (staged)
    prompt: list[dict[str, Any]]
    dropped: int  # conversation messages dropped to fit the context
    turn: list[dict[str, Any]]
    has_results: bool
    question: str
    system: str  # the caller's own system prompt: an answer that copies it is no answer
    answer_context: AnswerContext
    notes: list[str]  # memory notes and profile lines in the system prompt

    @property
    def tools_index(self) -> dict[str, ToolSpec]:
        return {tool.name: tool for tool in self.known} if self.purpose != "final" else {}


def resolve_request(
    model_config: str | Path | dict | Profile | None,
    messages: list[dict[str, Any]],
    tools_schema: Any = None,
    mode: str | None = None,
    model_name: str | None = None,
    tool_calling: str | None = None,
    *,
    strategy: str | None = None,
    backend: Backend | str | None = None,
    purpose: str | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool = True,
    response_format: Any = None,
) -> DecisionRequest:
    """Every option of ``generate_ai_message`` resolved into a ``DecisionRequest``; a
    caller's mistake raises ConfigError or MessageError here, before the model runs."""
    backend_name = backend if isinstance(backend, str) else None
    if mode is not None:  # the original command lines' name, translated at the door
        legacy_strategy, legacy_backend = from_legacy_mode(mode)
        strategy = strategy or legacy_strategy
        backend_name = backend_name or legacy_backend
    strategy = strategy or "react"
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    profile = _resolve_profile(model_config, model_name, tool_calling, backend_name)
    messages = validate_conversation(messages)
    tools, choice = _tool_choice(tool_choice, tool_specs(tools_schema))
    answer_schema = _answer_schema(response_format)
    if not parallel_tool_calls:
        profile = profile.with_tool_calling(parallel_calls=False)
    settings = profile.tool_calling
    if answer_schema is not None:
        settings = settings.model_copy(update={"answer_schema": answer_schema})
    if choice == "none" and purpose is None:
        purpose = "final"
    first = messages[0] if messages else {}
    system = str(first.get("content") or "") if first.get("role") == "system" else ""
    turn = current_turn(messages)
    has_results = any(m.get("role") == "tool" for m in turn)
    if purpose is None and strategy == "plan_execute":
        purpose = "step" if has_results else "plan"
    purpose = purpose or "decide"
    if purpose == "final":
        tools = []
    call_required = choice == "required" and bool(tools) and purpose != "plan"
    tc_mode = settings.mode
    engine = get_backend(profile) if backend is None or backend_name else backend
    staged = tc_mode == "staged" and can_score(engine)
    if tc_mode == "staged" and not staged:
        tc_mode = "constrained"  # a backend that cannot score: one grammar over the reply
    if not staged:
        check_mode_supported(engine, tc_mode, profile.name)
    known = tools  # a reply may call any tool of the conversation, offered or not
    selection = _preselect(messages, tools, settings, staged)
    if selection is not None:
        tools = [tool for tool in tools if tool.name in selection.offered]
    response_schema = None
    if tc_mode == "constrained":
        response_schema = grammar.reply_schema(
            tools,
            plan=purpose == "plan",
            settings=settings,
            require_call=call_required,
            one_call=not parallel_tool_calls,
            max_new_tokens=profile.generation.max_new_tokens,
        )
    found = evidence(messages, k=3) if staged else None
    prompt_mode = "staged" if staged else tc_mode
    prompt, dropped = _fit_prompt(engine, messages, tools, prompt_mode, purpose, profile, found)
    systems = "\n\n".join(
        str(m.get("content") or "") for m in messages if m.get("role") == "system"
    )
    question = last_user_text(messages)
    return DecisionRequest(
        profile=profile,
        messages=messages,
        strategy=strategy,
        purpose=purpose,
        tools=tools,
        known=known,
        call_required=call_required,
        one_call=not parallel_tool_calls,
        answer_schema=answer_schema,
        settings=settings,
        tc_mode=tc_mode,
        staged=staged,
        backend=engine,
        selection=selection,
        wire_tools=openai_tools(tools) or None,
        response_schema=response_schema,
        found=found,
        prompt=prompt,
        dropped=dropped,
        turn=turn,
        has_results=has_results,
        question=question,
        system=system,
        answer_context=AnswerContext(
            question=question,
            sources=_result_texts(turn),
            system=systems,
            called=frozenset(
                str(m["name"]) for m in turn if m.get("role") == "tool" and m.get("name")
            ),
        ),
        notes=note_lines(systems),
    )


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


def turn_results(turn: list[dict[str, Any]]) -> list[Any]:
    """The outputs of the ToolMessages of the current turn."""
    return [read_tool_result(m).get("output") for m in turn if m.get("role") == "tool"]


def done_calls(turn: list[dict[str, Any]]) -> set[str]:
    """The calls of the current turn whose result was a success."""
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


_CHOICES = ("none", "auto", "required")


def _tool_choice(tool_choice: Any, tools: list[ToolSpec]) -> tuple[list[ToolSpec], str]:
    """The tools a reply may call and the choice left (``none | auto | required``) for an
    OpenAI ``tool_choice``: a string, a named function ``{"type": "function", "function":
    {"name"}}`` (that tool, required) or ``{"type": "allowed_tools", "allowed_tools":
    {"mode", "tools"}}`` (those tools, ``auto`` or ``required``)."""
    if tool_choice is None:
        return tools, "auto"
    if isinstance(tool_choice, str):
        if tool_choice not in _CHOICES:
            raise ConfigError(
                f"tool_choice must be one of {', '.join(_CHOICES)}, a named function or "
                f"allowed_tools, got {tool_choice!r}"
            )
        return tools, tool_choice
    kind = tool_choice.get("type") if isinstance(tool_choice, dict) else None
    if kind == "function":
        names = [(tool_choice.get("function") or {}).get("name")]
        mode = "required"
    elif kind == "allowed_tools":
        allowed = tool_choice.get("allowed_tools") or {}
        mode = allowed.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise ConfigError(
                f"tool_choice.allowed_tools.mode must be auto or required, got {mode!r}"
            )
        names = [
            (entry.get("function") or {}).get("name", entry.get("name"))
            for entry in allowed.get("tools") or []
            if isinstance(entry, dict)
        ]
    else:
        raise ConfigError(f"tool_choice has an unknown form: {tool_choice!r}")
    offered = {tool.name for tool in tools}
    unknown = [name for name in names if name not in offered]
    if unknown or not names:
        raise ConfigError(
            f"tool_choice names {', '.join(map(repr, unknown)) or 'no tool'}, which is not "
            f"among the tools ({', '.join(sorted(offered)) or 'none'})"
        )
    return [tool for tool in tools if tool.name in names], mode


def _answer_schema(response_format: Any) -> dict[str, Any] | None:
    """The JSON Schema an answer must match for an OpenAI ``response_format`` (None: text)."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise ConfigError("response_format.json_schema.schema must be a JSON Schema object")
        try:
            check_json_schema(schema)
        except Exception as exc:  # jsonschema's SchemaError
            raise ConfigError(
                f"response_format.json_schema.schema is not a JSON Schema: {exc.args[0]}"
            ) from None
        check_local_refs(schema, "response_format.json_schema.schema")  # never fetched
        return schema
    raise ConfigError(
        f"response_format.type must be text, json_object or json_schema, got {kind!r}"
    )


def _resolve_profile(
    model_config: str | Path | dict | Profile | None,
    model_name: str | None,
    tool_calling: str | None,
    backend_name: str | None,
) -> Profile:
    if isinstance(model_config, Profile):
        profile = model_config
        if tool_calling:
            profile = profile.with_tool_calling(mode=tool_calling)
    else:
        profile = load_profile(model_config, model_name, tool_calling=tool_calling)
    if backend_name:
        profile = profile.with_backend(backend_name)
    return profile


def _preselect(
    messages: list[dict[str, Any]],
    tools: list[ToolSpec],
    settings: ToolCallingSettings,
    staged: bool,
) -> Selection | None:
    """Rank the tools against the question when the profile preselects (``preselect_k``) or
    decides in stages (which reads the similarity); None otherwise."""
    if not tools or (settings.preselect_k is None and not staged):
        return None
    always = list(settings.always)
    if staged and refers_back(last_user_text(messages)):
        # "read notes.txt ..., then add 7 to that number": the calculator stays on offer for
        # the computation after the read, however little the question looks like arithmetic
        always += [t.name for t in tools if does_arithmetic(t)]
    if staged:
        # "Is there a file in the workspace that talks about the weather?": the file search
        # stays on offer, however much the topic looks like another tool's
        always += file_searches(last_user_text(messages), tools)
    return default_selector().select(
        messages,
        tools,
        k=settings.preselect_k,
        always=always,
        on_request=settings.on_request,
    )


def _result_texts(turn: list[dict[str, Any]]) -> list[str]:
    """The outputs of the turn's successful tool calls, as text (what an answer may cite)."""
    texts = []
    for message in turn:
        if message.get("role") != "tool":
            continue
        result = read_tool_result(message)
        if result["status"] == "success":
            output = result["output"]
            texts.append(
                output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            )
    return texts


def _fit_prompt(
    backend: Backend,
    messages: list[dict[str, Any]],
    tools: list[ToolSpec],
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
    pass_tools = openai_tools(tools) if tools and tc_mode == "builtin" else None
    kept, dropped = fit_messages(messages, lambda c: count(build(c), pass_tools), budget)
    return build(kept), dropped
