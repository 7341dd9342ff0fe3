"""generate_ai_message(): prompt → backend → parse → validate → retry → result record.

Bad model output never raises: it is a result with ``status: "error"`` and the reason, with
every attempt recorded. A caller's mistake (missing file, unknown profile, malformed
messages) raises ConfigError or MessageError with a message saying how to fix it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lokal.config import (
    STRATEGIES,
    Profile,
    ToolCallingSettings,
    from_legacy_mode,
    load_profile,
)
from lokal.errors import BackendDeadline, BackendError, ConfigError, MessageError, ParseError
from lokal.llm import grammar
from lokal.llm.backends import (
    Backend,
    Completion,
    GenerationRequest,
    check_mode_supported,
    get_backend,
)
from lokal.llm.checks import AnswerContext, Finding, check_answer, note_lines, quoted_from
from lokal.llm.evidence import Passage, evidence
from lokal.llm.extract import choose_passage, extract_answer
from lokal.llm.parser import ParseResult, coerce_args, parse_model_output, resolve_tool_name
from lokal.llm.plan import parse_plan_output
from lokal.llm.prompts import (
    CORRECTIVE,
    EVIDENCE_LABEL,
    build_prompt_messages,
    fit_messages,
    instruction_texts,
)
from lokal.llm.quality import reply_problem, text_loop, trim_loop
from lokal.llm.select import Selection, default_selector
from lokal.llm.staged import DecisionTimeout, StagedEngine, can_score
from lokal.messages import (
    call_key,
    current_turn,
    last_user_text,
    make_ai_message,
    read_tool_result,
)
from lokal.records import Attempt, Decision, DecisionError, Usage
from lokal.tools.schema import (
    ToolSpec,
    check_json_schema,
    check_local_refs,
    openai_tools,
    schema_validator,
    tool_specs,
)

__all__ = ["done_calls", "generate_ai_message", "turn_results", "validate_conversation"]

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
    context: AnswerContext | None = None,
) -> tuple[dict[str, Any], bool, list[Finding]]:
    """The message, with a looping tail cut off (and whether it was) and the answer checks'
    trims (``lokal.llm.checks``: labels, repeated blocks, recited notes, sentences that
    contradict the tool results), with their findings; raise _BadReply for a reply that
    cannot be used, including an answer that copies lokal's instructions or the
    conversation's ``system`` prompt back, one a check asks to retry, and one that mentions
    none of the ``grounding`` values (the short results closest to the question)."""
    finish = completion.finish_reason
    if message["tool_calls"]:
        if finish in ("length", "repetition"):
            what = "repeated itself" if finish == "repetition" else "was cut off at the limit"
            raise _BadReply(f"the reply {what} inside a tool call; write shorter arguments")
        return message, False, []
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
    findings: list[Finding] = []
    if context is not None and content.strip():
        checked, findings = check_answer(content, context)
        retry = [f for f in findings if f.action == "retry"]
        if retry:
            raise _BadReply(retry[0].detail)
        if checked != content:
            content, trimmed = checked, True
    folded = content.casefold()
    if grounding and not any(value.casefold() in folded for value in grounding):
        shown = "; ".join(grounding)
        raise _Ungrounded(f"the answer does not use the tool results, which say: {shown}")
    if trimmed:
        message = make_ai_message(content)
    return message, trimmed, findings


def _cut_off(completion: Completion, limit: int, purpose: str) -> str | None:
    """Why the reply is cut off (the backend's finish reason is ``length``, or it reports
    no reason and wrote ``max_new_tokens`` tokens), or None."""
    tokens = completion.completion_tokens
    if completion.finish_reason != "length" and not (
        completion.finish_reason is None and tokens is not None and tokens >= limit
    ):
        return None
    shorter = "fewer steps, shorter descriptions" if purpose == "plan" else "shorter arguments"
    return (
        f"the reply was cut off at the limit of {limit} tokens (max_new_tokens) before it "
        f"was complete; a cut-off reply is not used: write {shorter} and fewer calls"
    )


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
    return default_selector().select(
        messages, tools, k=settings.preselect_k, always=settings.always
    )


def _with_generation(profile: Profile, generation: Any) -> Profile:
    return profile.replace(generation=generation)


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


def _validate_arguments(message: dict[str, Any], tools: dict[str, ToolSpec]) -> None:
    """Raise _Unusable for a call the tools cannot take, worded as the registry words it."""
    if message["tool_calls"] and not tools:
        raise _Unusable("unknown_tool", "no tools are available; answer with content instead")
    for call in message["tool_calls"]:
        problem = tools[call["name"]].validate(call["args"])
        if problem is not None:
            raise _Unusable(
                "invalid_arguments", f"invalid arguments for tool '{call['name']}': {problem}"
            )


def _merge_duplicates(message: dict[str, Any]) -> tuple[dict[str, Any], int]:
    seen: set[str] = set()
    kept = []
    for call in message["tool_calls"]:
        key = call_key(call["name"], call["args"])
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


def _json_answer(completion: Completion) -> dict[str, Any] | None:
    """The AIMessage of a reply that is the envelope ``{"content": <JSON value>}`` (what the
    grammar of a ``response_format`` writes), else None."""
    try:
        value = json.loads(completion.text)
    except (ValueError, RecursionError):
        return None
    if (
        isinstance(value, dict)
        and set(value) == {"content"}
        and not isinstance(value["content"], str)
    ):
        return make_ai_message(json.dumps(value["content"], ensure_ascii=False))
    return None


def _check_answer_format(message: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The answer with its content as compact JSON; _Unusable when it is not JSON matching
    ``schema``."""
    text = (message.get("content") or "").strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise _Unusable(
            "parse_error", "the answer must be a JSON value (response_format), not plain text"
        ) from None
    error = next(schema_validator(schema).iter_errors(value), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the answer"
        raise _Unusable(
            "parse_error", f"the JSON answer does not match the schema at {where}: {error.message}"
        )
    return make_ai_message(json.dumps(value, ensure_ascii=False))


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


def generate_ai_message(
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
) -> Decision:
    """Ask the model for the next step and return the decision record.

    ``tools_schema``: the tools on offer in any accepted form (``ToolSpec``s, ``@tool``
    functions, OpenAI or flat dicts, BFCL types), checked before the model runs.
    ``strategy``: ``react`` (one decision) or ``plan_execute`` (a plan on the first turn, step
    decisions after tool results). ``tool_calling`` overrides the profile's
    ``prompt_json | builtin | constrained | staged``. ``backend`` replaces the profile's
    backend: a name (``"mock"``) or an instance (tests pass a ScriptedBackend).
    ``mode`` is the original command lines' name for the first axis (``prompt_json``,
    ``plan_execute``, or ``mock`` for the mock backend). ``purpose="final"`` asks for a final
    answer with tools disabled.

    ``tool_choice`` (OpenAI's): ``"none"`` disables the tools (as ``purpose="final"``),
    ``"auto"`` (default) lets the model choose, ``"required"`` makes a reply without a call
    unusable (constrained: no answer branch in the grammar; staged: the call is forced;
    otherwise such a reply is retried with a corrective message); a named function or
    ``allowed_tools`` restricts the tools to those names first (named: required).
    ``parallel_tool_calls=False`` allows one call per reply (grammar ``maxItems: 1``, staged:
    no second call; a parsed reply with more keeps the first, the others are recorded in
    ``parse.dropped_calls``). ``response_format`` (``json_object`` or ``json_schema``) makes
    the answer's content JSON matching it, by grammar where the mode has one and checked (and
    retried) in every mode.
    """
    backend_name = backend if isinstance(backend, str) else None
    if mode is not None:
        legacy_strategy, legacy_backend = from_legacy_mode(mode)
        strategy = strategy or legacy_strategy
        backend_name = backend_name or legacy_backend
    strategy = strategy or "react"
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    profile = _resolve_profile(model_config, model_name, tool_calling, backend_name)
    messages = validate_conversation(messages)
    tools = tool_specs(tools_schema)
    tools, choice = _tool_choice(tool_choice, tools)
    answer_schema = _answer_schema(response_format)
    if not parallel_tool_calls:
        profile = profile.with_tool_calling(parallel_calls=False)
    tools_index = {tool.name: tool for tool in tools}
    settings = profile.tool_calling
    if answer_schema is not None:
        settings = settings.model_copy(update={"answer_schema": answer_schema})
    if choice == "none" and purpose is None:
        purpose = "final"
    # the caller's system prompt: an answer that copies it back is not an answer
    first = messages[0] if messages else {}
    system = str(first.get("content") or "") if first.get("role") == "system" else ""
    turn = current_turn(messages)
    has_results = any(m.get("role") == "tool" for m in turn)
    if purpose is None and strategy == "plan_execute":
        purpose = "step" if has_results else "plan"
    purpose = purpose or "decide"
    if purpose == "final":
        tools, tools_index = [], {}
    call_required = choice == "required" and bool(tools) and purpose != "plan"
    tc_mode = settings.mode
    engine_backend = get_backend(profile) if backend is None or backend_name else backend
    staged = tc_mode == "staged" and can_score(engine_backend)
    if tc_mode == "staged" and not staged:
        tc_mode = "constrained"  # a backend that cannot score: one grammar over the reply
    if not staged:
        check_mode_supported(engine_backend, tc_mode, profile.name)
    known = tools  # a reply may call any tool of the conversation, offered or not
    selection = _preselect(messages, tools, settings, staged)
    if selection is not None:
        tools = [tool for tool in tools if tool.name in selection.offered]
    wire_tools = openai_tools(tools) or None

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
    prompt_mode = "staged" if staged else tc_mode
    found = evidence(messages, k=3) if staged else None
    prompt, dropped = _fit_prompt(
        engine_backend, messages, tools, prompt_mode, purpose, profile, found
    )
    record = Decision(
        model={
            "profile": profile.name,
            "display_name": profile.display_name,
            "backend": engine_backend.name,
        },
        strategy=strategy,
        purpose=purpose,
        tool_calling="staged" if staged else tc_mode,
        prompt=prompt,
        dropped_messages=dropped,
    )
    if settings.mode == "staged" and not staged:
        record.fallback = f"backend {engine_backend.name!r} cannot score; one grammar per reply"
    if selection is not None:
        record.selection = selection.to_dict()
    question = last_user_text(messages)
    systems = "\n\n".join(
        str(m.get("content") or "") for m in messages if m.get("role") == "system"
    )
    answer_context = AnswerContext(question=question, sources=_result_texts(turn), system=systems)
    notes = note_lines(systems)
    started = time.perf_counter()
    budget_s = settings.decision_budget_s
    # the engine stops a little before the budget: a step under way when the deadline
    # passes finishes first, and the decision must still end within its budget
    deadline = started + budget_s - min(2.0, 0.05 * budget_s) if budget_s else None
    for attempt_number in range(settings.max_retries + 1):
        if attempt_number and deadline is not None and time.perf_counter() > deadline:
            # no time left for a retry: the decision ends on its budget, the last error kept
            last = record.attempts[-1].error
            record.error = DecisionError(
                "timeout",
                f"the decision used its {budget_s:g} s (tool_calling.decision_budget_s) "
                f"before attempt {attempt_number + 1}; the last attempt failed: "
                f"{last.message if last else 'unknown'}",
            )
            record.partial = {
                "stage": f"before attempt {attempt_number + 1}",
                "elapsed_s": round(time.perf_counter() - started, 2),
                "tool_calls": [],
                "last_error": last.to_dict() if last else None,
            }
            break
        request = GenerationRequest(
            messages=prompt,
            settings=profile.generation,
            tools=wire_tools,
            pass_tools=tc_mode == "builtin",
            response_schema=response_schema,
            purpose=purpose,
            conversation=messages,
            # the hard stop: a backend that can abort its evaluation stops here, a little
            # before the budget (an abort lands between two graph nodes, then the record
            # is written)
            deadline=started + budget_s - min(0.25, 0.01 * budget_s) if budget_s else None,
        )
        force = None
        previous = record.attempts[-1] if record.attempts else None
        if previous is not None and previous.error and previous.error.type == "bad_reply":
            # the content was bad, not the choice to answer or call: keep the choice
            force = (previous.staged or {}).get("choice")
        attempt_started = time.perf_counter()
        attempt = Attempt(number=attempt_number + 1)
        record.attempts.append(attempt)
        record.prompt = prompt
        try:
            if staged:
                engine = StagedEngine(
                    engine_backend,
                    request,
                    tools,
                    selection,
                    settings,
                    purpose=purpose,
                    has_results=has_results,
                    question=question,
                    results=turn_results(turn),
                    done=done_calls(turn),
                    deadline=deadline,
                )
                if call_required:
                    force = "call"
                completion = engine.run(force="answer" if purpose == "final" else force)
            else:
                completion = engine_backend.generate(request)
        except BackendDeadline:  # one generation, stopped at the budget
            elapsed = time.perf_counter() - started
            attempt.latency_ms = round((time.perf_counter() - attempt_started) * 1000, 1)
            attempt.fail(
                "timeout",
                f"the decision used up its {budget_s:g} s budget "
                f"(tool_calling.decision_budget_s: the model was stopped after {elapsed:.1f} s)",
            )
            record.error = attempt.error
            record.partial = {"stage": "reply", "elapsed_s": round(elapsed, 2), "tool_calls": []}
            break
        except BackendError as exc:
            attempt.fail("backend_error", str(exc))
            record.error = attempt.error
            break
        except DecisionTimeout as exc:
            elapsed = time.perf_counter() - started
            attempt.latency_ms = round((time.perf_counter() - attempt_started) * 1000, 1)
            attempt.staged = exc.trace
            done = len(exc.calls)
            attempt.fail(
                "timeout",
                f"the decision used up its {budget_s:g} s budget "
                f"(tool_calling.decision_budget_s: stopped after {elapsed:.1f} s, "
                f"{'inside a model step' if exc.inside else 'when the next step would not fit'}"
                f") in stage: {exc.stage}; {done} complete call"
                f"{'' if done == 1 else 's'} so far (in partial)",
            )
            record.error = attempt.error
            record.partial = {
                "stage": exc.stage,
                "elapsed_s": round(elapsed, 2),
                "tool_calls": exc.calls,
                "pending_call": exc.pending,
            }
            break
        attempt.latency_ms = round((time.perf_counter() - attempt_started) * 1000, 1)
        attempt.raw_text = completion.text
        attempt.usage = Usage(completion.prompt_tokens, completion.completion_tokens)
        attempt.finish_reason = completion.finish_reason
        if completion.details:
            details = dict(completion.details)
            attempt.staged = details.pop("staged", None)
            attempt.backend = details
        record.usage.add(attempt.usage)
        record.raw_text = completion.text
        cut = _cut_off(completion, request.settings.max_new_tokens, purpose)
        try:
            json_answer = _json_answer(completion) if answer_schema is not None else None
            if json_answer is not None:
                message, details = json_answer, {"format": "json_envelope", "repaired": False}
            else:
                message, details = _interpret(completion, known, purpose, settings)
            if cut and (message["tool_calls"] or purpose == "plan"):
                # a cut-off call may parse once repaired, but not into what was meant
                raise _BadReply(cut)
            if call_required and not message["tool_calls"]:
                names = ", ".join(tool.name for tool in tools)
                raise _Unusable(
                    "parse_error", f"a tool call is required here; call one of: {names}"
                )
            if answer_schema is not None and not message["tool_calls"]:
                message = _check_answer_format(message, answer_schema)
            if tools_index or message["tool_calls"]:
                _validate_arguments(message, tools_index)
            if purpose == "plan" and attempt_number < settings.max_retries:
                _check_plan_covers(message, question, tools)
            grounding = _grounding(found) if purpose != "final" else None
            message, trimmed, findings = _check_quality(
                message, completion, grounding, system, answer_context
            )
            if trimmed:
                details["loop_trimmed"] = True
            if findings:
                details["checks"] = [f.to_dict() for f in findings]
            if not message["tool_calls"] and answer_schema is None:
                content = message.get("content") or ""
                shown = [*answer_context.sources, *(found or [])]  # results, evidence
                quoted = bool(shown) and quoted_from(content, shown)
                details["answer_source"] = "quoted" if quoted else "model"
        except ParseError as exc:
            if cut:  # the text ends where the limit cut it, not where the model ended it
                attempt.fail("bad_reply", cut)
            else:
                kind = "unknown_tool" if exc.kind == "unknown_tool" else "parse_error"
                attempt.fail(kind, exc.reason, exc.kind)
        except _Unusable as exc:
            attempt.fail(exc.kind, str(exc))
        except _BadReply as exc:
            attempt.fail("bad_reply", str(exc))
        else:
            merged = 0
            if settings.merge_duplicate_calls and message["tool_calls"]:
                message, merged = _merge_duplicates(message)
            details["merged_duplicates"] = merged
            if not parallel_tool_calls and len(message["tool_calls"]) > 1:
                # one call per reply: the first is kept, the others recorded
                extra = [{"name": c["name"], "args": c["args"]} for c in message["tool_calls"][1:]]
                details["dropped_calls"] = [*(details.get("dropped_calls") or []), *extra]
                message = make_ai_message("", message["tool_calls"][:1])
            attempt.status, attempt.format = "success", details.get("format")
            record.status, record.ai_message, record.error = "success", message, None
            record.parse = {**details, "attempts": attempt_number + 1}
            break
        assert attempt.error is not None
        record.error = attempt.error
        if attempt_number == settings.max_retries:
            break
        attempt.corrective = _corrective(attempt.error.message, tc_mode)
        prompt = [
            *prompt,
            {"role": "assistant", "content": completion.text},
            {"role": "user", "content": attempt.corrective},
        ]
        if attempt.error.type == "bad_reply" and profile.generation.repeat_penalty < 1.15:
            # a loop or a copied text: retry with a repeat penalty as well as the reason
            request_settings = request.settings.model_copy(update={"repeat_penalty": 1.15})
            profile = _with_generation(profile, request_settings)
    if record.status != "success" and _may_extract(
        record, purpose, has_results or bool(notes), call_required
    ):
        _extract(record, messages, engine_backend, profile, answer_schema, notes)
    if record.status != "success":
        record.parse["attempts"] = len(record.attempts)
    record.latency_ms = round((time.perf_counter() - started) * 1000, 1)
    return record


# a part of the request clearly about one tool: its cosine to the tool at least this, and
# this much above the next tool's
PLAN_CLAUSE_MIN_SIMILARITY = 0.3
PLAN_CLAUSE_MIN_MARGIN = 0.15


def _check_plan_covers(message: dict[str, Any], question: str, tools: list[ToolSpec]) -> None:
    """Raise _BadReply when a part of the request (a clause: "read notes.txt", "compute
    12 * 7") is clearly about a tool the plan never calls: the plan left that part out."""
    from lokal.llm.staged.candidates import clauses

    parts = clauses(question)
    planned = {call["name"] for call in message["tool_calls"]}
    if len(parts) < 2 or not planned or len(tools) < 2:
        return
    selector = default_selector()
    for part in parts:
        ranking, dense = selector.rank(part, tools)
        if not dense or not ranking:
            return  # without embeddings the check cannot tell
        best = ranking[0]
        margin = best.similarity - (ranking[1].similarity if len(ranking) > 1 else 0.0)
        if (
            best.name not in planned
            and best.similarity >= PLAN_CLAUSE_MIN_SIMILARITY
            and margin >= PLAN_CLAUSE_MIN_MARGIN
        ):
            raise _BadReply(
                f"the plan leaves out part of the request, {part!r}: add a step that calls "
                f"{best.name} for it"
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


def _may_extract(record: Decision, purpose: str, has_results: bool, call_required: bool) -> bool:
    """Whether a failed decision may end in an extracted answer: the model was to answer
    after tool results and wrote nothing usable (not a backend failure or a timeout)."""
    error = record.error
    if error is None or not has_results or call_required or purpose == "plan":
        return False
    if purpose == "final":
        return error.type in ("bad_reply", "parse_error")
    return error.type == "bad_reply"


def _extract(
    record: Decision,
    messages: list[dict[str, Any]],
    backend: Backend,
    profile: Profile,
    answer_schema: dict[str, Any] | None,
    notes: list[str],
) -> None:
    """Make ``record`` a success whose answer is the passage of the tool results that
    answers the question (``lokal.llm.extract``), when there is one; without tool results,
    the memory note that does (notes were selected for the question)."""
    if answer_schema is not None:
        return
    try:
        extracted = extract_answer(messages, backend=backend, settings=profile.generation)
        if extracted is None and notes:
            extracted = choose_passage(
                last_user_text(messages),
                [Passage(note, "memory") for note in notes],
                backend=backend,
                settings=profile.generation,
            )
    except BackendError:
        extracted = None
    if extracted is None:
        return
    failed = record.error
    record.status, record.error = "success", None
    record.ai_message = make_ai_message(extracted.text)
    record.parse = {
        "format": "extracted",
        "answer_source": "extracted",
        "extracted": extracted.to_dict(),
        "model_failed": failed.to_dict() if failed else None,
        "attempts": len(record.attempts),
    }


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


def _interpret(
    completion: Completion,
    tools: list[ToolSpec],
    purpose: str,
    settings: ToolCallingSettings,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Turn one completion into an AIMessage and the parse details; raise ParseError."""
    native = _native_message(completion)
    if native is not None:
        # Native calls still go through the parser's name and type checks.
        index = {tool.name: tool for tool in tools}
        calls = []
        for call in native["tool_calls"]:
            name = resolve_tool_name(call["name"], index) if index else call["name"]
            args = coerce_args(call["args"], index[name].parameters) if index else call["args"]
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
        raise ParseError(
            "tools are disabled for the final answer; answer in plain text",
            kind="tools_disabled",
        )
    return result.message, {
        "format": result.format,
        "repaired": result.repaired,
        "preamble": result.preamble,
        "reasoning": result.reasoning,
        "conflict": result.conflict,
        "dropped_calls": result.dropped_calls,
    }
