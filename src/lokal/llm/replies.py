"""The reply checks of a decision: one completion becomes an AIMessage, or the reason it
cannot be used.

``check_reply`` reads the completion (a JSON answer of a ``response_format``, a native or
parsed tool call, a plan) and then runs ``REPLY_CHECKS`` in order, each a small named
function that returns the message (trimmed where it can be) or raises: ``cut_off`` (a call
or plan cut at the token limit), ``required_call``, ``answer_format``, ``arguments``,
``plan_covers``, ``quality`` (loops, echoes, the answer checks, grounding) and ``source``
(whether the answer quotes what lokal showed). ``finish_reply`` then merges identical calls
and keeps one call when parallel calls are off. The attempt loop
(``lokal.llm.attempts``) turns a raised check into a failed attempt and a retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lokal.config import ToolCallingSettings
from lokal.errors import ParseError
from lokal.llm.backends import Completion
from lokal.llm.checks import AnswerContext, Finding, check_answer, quoted_from, quotes_any
from lokal.llm.parser import ParseResult, coerce_args, parse_model_output, resolve_tool_name
from lokal.llm.plan import parse_plan_output
from lokal.llm.prompts import EVIDENCE_LABEL, instruction_texts
from lokal.llm.quality import reply_problem, text_loop, trim_loop
from lokal.llm.select import default_selector
from lokal.messages import call_key, make_ai_message
from lokal.tools.schema import ToolSpec, schema_validator

if TYPE_CHECKING:
    from lokal.llm.request import DecisionRequest

__all__ = [
    "REPLY_CHECKS",
    "BadReply",
    "ReplyContext",
    "Ungrounded",
    "UnusableReply",
    "check_reply",
    "cut_off",
    "finish_reply",
]


class UnusableReply(Exception):
    """A reply that parsed but cannot be used (wrong arguments, no tools on offer)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class BadReply(Exception):
    """A reply that parsed but is garbage: a loop, cut off, a placeholder, an echo."""


class Ungrounded(BadReply):
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
        # a field ("count", "mean_price"), not a sentence's lead ("Tools the agent can use:
        # file_reader, calculator.", a line of a file the answer may quote any part of)
        if sep and 0 < len(value) <= 40 and len(key.split()) <= 3:
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
    contradict the tool results), with their findings; raise BadReply for a reply that
    cannot be used, including an answer that copies lokal's instructions or the
    conversation's ``system`` prompt back, one a check asks to retry, and one that mentions
    none of the ``grounding`` values (the short results closest to the question)."""
    finish = completion.finish_reason
    if message["tool_calls"]:
        if finish in ("length", "repetition"):
            what = "repeated itself" if finish == "repetition" else "was cut off at the limit"
            raise BadReply(f"the reply {what} inside a tool call; write shorter arguments")
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
        raise BadReply(problem)
    findings: list[Finding] = []
    if context is not None and content.strip():
        checked, findings = check_answer(content, context)
        retry = [f for f in findings if f.action == "retry"]
        if retry:
            raise BadReply(retry[0].detail)
        if checked != content:
            content, trimmed = checked, True
    folded = content.casefold()
    if grounding and not any(value.casefold() in folded for value in grounding):
        shown = "; ".join(grounding)
        raise Ungrounded(f"the answer does not use the tool results, which say: {shown}")
    if trimmed:
        message = make_ai_message(content)
    return message, trimmed, findings


def cut_off(completion: Completion, limit: int, purpose: str) -> str | None:
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


def _validate_arguments(message: dict[str, Any], tools: dict[str, ToolSpec]) -> None:
    """Raise UnusableReply for a call the tools cannot take, worded as the registry words it."""
    if message["tool_calls"] and not tools:
        raise UnusableReply("unknown_tool", "no tools are available; answer with content instead")
    for call in message["tool_calls"]:
        problem = tools[call["name"]].validate(call["args"])
        if problem is not None:
            raise UnusableReply(
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
    """The answer with its content as compact JSON; UnusableReply when it is not JSON matching
    ``schema``."""
    text = (message.get("content") or "").strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise UnusableReply(
            "parse_error", "the answer must be a JSON value (response_format), not plain text"
        ) from None
    error = next(schema_validator(schema).iter_errors(value), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the answer"
        raise UnusableReply(
            "parse_error", f"the JSON answer does not match the schema at {where}: {error.message}"
        )
    return make_ai_message(json.dumps(value, ensure_ascii=False))


# a part of the request clearly about one tool: its cosine to the tool at least this, and
# this much above the next tool's
PLAN_CLAUSE_MIN_SIMILARITY = 0.3
PLAN_CLAUSE_MIN_MARGIN = 0.15


def _check_plan_covers(message: dict[str, Any], question: str, tools: list[ToolSpec]) -> None:
    """Raise BadReply when a part of the request (a clause: "read notes.txt", "compute
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
            raise BadReply(
                f"the plan leaves out part of the request, {part!r}: add a step that calls "
                f"{best.name} for it"
            )


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


# --- the checks, in order --------------------------------------------------------------


@dataclass
class ReplyContext:
    """What a check reads besides the message: the decision's request, the completion, why
    it was cut off (None: it was not), and whether this is the last attempt."""

    request: DecisionRequest
    completion: Completion
    cut: str | None
    last_attempt: bool


ReplyCheck = Callable[[dict[str, Any], dict[str, Any], ReplyContext], dict[str, Any]]


def check_cut_off(message: dict[str, Any], details: dict[str, Any], ctx: ReplyContext) -> Any:
    """A call or a plan cut off at the token limit may parse once repaired, but not into
    what was meant."""
    if ctx.cut and (message["tool_calls"] or ctx.request.purpose == "plan"):
        raise BadReply(ctx.cut)
    return message


def check_required_call(message: dict[str, Any], details: dict[str, Any], ctx: ReplyContext) -> Any:
    """``tool_choice: required``: an answer without a call is not usable."""
    if ctx.request.call_required and not message["tool_calls"]:
        names = ", ".join(tool.name for tool in ctx.request.tools)
        raise UnusableReply("parse_error", f"a tool call is required here; call one of: {names}")
    return message


def check_answer_format(message: dict[str, Any], details: dict[str, Any], ctx: ReplyContext) -> Any:
    """``response_format``: the answer is JSON matching the schema (compacted)."""
    schema = ctx.request.answer_schema
    if schema is not None and not message["tool_calls"]:
        return _check_answer_format(message, schema)
    return message


def check_arguments(message: dict[str, Any], details: dict[str, Any], ctx: ReplyContext) -> Any:
    """Every call names a tool on offer and its arguments match the tool's schema."""
    if ctx.request.tools_index or message["tool_calls"]:
        _validate_arguments(message, ctx.request.tools_index)
    return message


def check_plan_covers(message: dict[str, Any], details: dict[str, Any], ctx: ReplyContext) -> Any:
    """A plan keeps every part of the request (retried while attempts remain)."""
    if ctx.request.purpose == "plan" and not ctx.last_attempt:
        _check_plan_covers(message, ctx.request.question, ctx.request.tools)
    return message


def check_quality(message: dict[str, Any], details: dict[str, Any], ctx: ReplyContext) -> Any:
    """Loops cut, echoes and garbage refused, the answer checks' trims, grounding in the
    tool results (``_check_quality``)."""
    request = ctx.request
    grounding = _grounding(request.found) if request.purpose != "final" else None
    message, trimmed, findings = _check_quality(
        message, ctx.completion, grounding, request.system, request.answer_context
    )
    if trimmed:
        details["loop_trimmed"] = True
    if findings:
        details["checks"] = [f.to_dict() for f in findings]
    return message


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# a failed call's passage (lokal.llm.evidence.result_passages): "calculator failed: ..."
_FAILURE = re.compile(r"^[\w.-]+ failed: ")


def check_source(message: dict[str, Any], details: dict[str, Any], ctx: ReplyContext) -> Any:
    """Where a text answer came from: ``quoted`` (it copies passages lokal showed) or
    ``model``."""
    request = ctx.request
    if not message["tool_calls"] and request.answer_schema is None:
        content = message.get("content") or ""
        shown = [*request.answer_context.sources, *(request.found or [])]
        quoted = bool(shown) and quoted_from(content, shown)
        failures = [p for p in shown if _FAILURE.match(p)]
        if quoted and failures and quoted_from(content, failures):
            # "code_execution failed: ValueError: give exactly one of code or command" as
            # the answer to "what does calling a tool mean?": an error is no answer
            raise BadReply(
                "the answer repeats a tool's error message; answer the question, or say in "
                "your own words that the tool failed"
            )
        # a sentence of five words or more copied from the results, with words of its own
        # around it: "This guide shows how to work with the local agent runtime. The tool
        # is a file_reader, which reads a text file." for "what does the calculator do?"
        copied = quoted or any(
            len(sentence.split()) >= 5 and quoted_from(sentence, shown)
            for sentence in _SENTENCE.split(content)
        )
        if copied and request.found and not quotes_any(content, request.found[:1]):
            # "This guide shows how to work with the local agent runtime." for "which tools
            # can the agent use?" or "what does the agent do first with a skill?": a copy
            # of the result, but not of the passage closest to the question (the first line
            # of a file is what a 135M model copies most; it was second closest)
            raise BadReply(
                "the answer copies a part of the tool results that is not about the question; "
                "answer the question from the passage closest to it"
            )
        details["answer_source"] = "quoted" if quoted else "model"
    return message


REPLY_CHECKS: tuple[tuple[str, ReplyCheck], ...] = (
    ("cut_off", check_cut_off),
    ("required_call", check_required_call),
    ("answer_format", check_answer_format),
    ("arguments", check_arguments),
    ("plan_covers", check_plan_covers),
    ("quality", check_quality),
    ("source", check_source),
)


def check_reply(ctx: ReplyContext) -> tuple[dict[str, Any], dict[str, Any]]:
    """The completion as an AIMessage and its parse details, after every reply check;
    raises ParseError, UnusableReply or BadReply for a reply that cannot be used."""
    request = ctx.request
    json_answer = _json_answer(ctx.completion) if request.answer_schema is not None else None
    if json_answer is not None:
        message, details = json_answer, {"format": "json_envelope", "repaired": False}
    else:
        message, details = _interpret(
            ctx.completion, request.known, request.purpose, request.settings
        )
    for _name, check in REPLY_CHECKS:
        message = check(message, details, ctx)
    return message, details


def finish_reply(
    message: dict[str, Any], details: dict[str, Any], request: DecisionRequest
) -> dict[str, Any]:
    """A usable reply's last touches: identical calls merged, one call kept when parallel
    calls are off (the others recorded in ``details``)."""
    merged = 0
    if request.settings.merge_duplicate_calls and message["tool_calls"]:
        message, merged = _merge_duplicates(message)
    details["merged_duplicates"] = merged
    if request.one_call and len(message["tool_calls"]) > 1:
        extra = [{"name": c["name"], "args": c["args"]} for c in message["tool_calls"][1:]]
        details["dropped_calls"] = [*(details.get("dropped_calls") or []), *extra]
        message = make_ai_message("", message["tool_calls"][:1])
    return message
