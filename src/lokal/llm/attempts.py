"""The attempt loop of a decision: ask the backend, check the reply, retry with the reason.

``run_attempts`` takes a resolved ``DecisionRequest`` (``lokal.llm.request``) and returns the
``Decision`` record: every attempt with its raw text, usage, latency and error; a reply that
fails a check (``lokal.llm.replies``) is retried with a corrective message (and a repeat
penalty after a loop) while attempts remain; the time budget ends the loop with a ``timeout``
and what was found so far; a decision after tool results whose replies all failed may end
with an extracted answer (``lokal.llm.extract``). Bad model output never raises.
"""

from __future__ import annotations

import time
from typing import Any

from lokal.config import Profile
from lokal.errors import BackendDeadline, BackendError, ParseError
from lokal.llm.backends import Backend, Completion, GenerationRequest
from lokal.llm.evidence import Passage
from lokal.llm.extract import choose_passage, extract_answer
from lokal.llm.prompts import CORRECTIVE
from lokal.llm.replies import (
    BadReply,
    ReplyContext,
    UnusableReply,
    check_reply,
    cut_off,
    finish_reply,
)
from lokal.llm.request import DecisionRequest, done_calls, turn_results
from lokal.llm.staged import DecisionTimeout, StagedEngine
from lokal.messages import last_user_text, make_ai_message
from lokal.records import Attempt, Decision, DecisionError, Usage

__all__ = ["run_attempts"]


def new_record(request: DecisionRequest) -> Decision:
    """The decision record before any attempt."""
    profile = request.profile
    record = Decision(
        model={
            "profile": profile.name,
            "display_name": profile.display_name,
            "backend": request.backend.name,
        },
        strategy=request.strategy,
        purpose=request.purpose,
        tool_calling="staged" if request.staged else request.tc_mode,
        prompt=request.prompt,
        dropped_messages=request.dropped,
    )
    if request.settings.mode == "staged" and not request.staged:
        record.fallback = f"backend {request.backend.name!r} cannot score; one grammar per reply"
    if request.selection is not None:
        record.selection = request.selection.to_dict()
    return record


def _complete(
    request: DecisionRequest,
    generation: GenerationRequest,
    force: str | None,
    deadline: float | None,
) -> Completion:
    """One reply from the backend: in stages, or one generation."""
    if not request.staged:
        return request.backend.generate(generation)
    engine = StagedEngine(
        request.backend,
        generation,
        request.tools,
        request.selection,
        request.settings,
        purpose=request.purpose,
        has_results=request.has_results,
        question=request.question,
        results=turn_results(request.turn),
        done=done_calls(request.turn),
        deadline=deadline,
    )
    if request.call_required:
        force = "call"
    return engine.run(force="answer" if request.purpose == "final" else force)


def _timed_out(
    record: Decision, attempt: Attempt, budget_s: float, started: float, exc: Exception
) -> None:
    """The attempt and the record ended by the time budget: inside the backend
    (``BackendDeadline``) or by the staged engine (``DecisionTimeout``, with the calls
    found so far)."""
    elapsed = time.perf_counter() - started
    if isinstance(exc, DecisionTimeout):
        attempt.staged = exc.trace
        done = len(exc.calls)
        where = "inside a model step" if exc.inside else "when the next step would not fit"
        attempt.fail(
            "timeout",
            f"the decision used up its {budget_s:g} s budget "
            f"(tool_calling.decision_budget_s: stopped after {elapsed:.1f} s, {where}"
            f") in stage: {exc.stage}; {done} complete call"
            f"{'' if done == 1 else 's'} so far (in partial)",
        )
        record.partial = {
            "stage": exc.stage,
            "elapsed_s": round(elapsed, 2),
            "tool_calls": exc.calls,
            "pending_call": exc.pending,
        }
    else:
        attempt.fail(
            "timeout",
            f"the decision used up its {budget_s:g} s budget "
            f"(tool_calling.decision_budget_s: the model was stopped after {elapsed:.1f} s)",
        )
        record.partial = {"stage": "reply", "elapsed_s": round(elapsed, 2), "tool_calls": []}
    record.error = attempt.error


def _no_time_for(record: Decision, number: int, budget_s: float, started: float) -> None:
    """No time left for attempt ``number``: the decision ends on its budget, the last
    error kept."""
    last = record.attempts[-1].error
    record.error = DecisionError(
        "timeout",
        f"the decision used its {budget_s:g} s (tool_calling.decision_budget_s) "
        f"before attempt {number}; the last attempt failed: "
        f"{last.message if last else 'unknown'}",
    )
    record.partial = {
        "stage": f"before attempt {number}",
        "elapsed_s": round(time.perf_counter() - started, 2),
        "tool_calls": [],
        "last_error": last.to_dict() if last else None,
    }


def run_attempts(request: DecisionRequest) -> Decision:
    """Attempts until a reply passes the checks, the retries run out, or the time budget
    does; the record of all of them."""
    record = new_record(request)
    settings, profile, prompt = request.settings, request.profile, request.prompt
    started = time.perf_counter()
    budget_s = settings.decision_budget_s
    # the engine stops a little before the budget: a step under way when the deadline
    # passes finishes first, and the decision must still end within its budget
    deadline = started + budget_s - min(2.0, 0.05 * budget_s) if budget_s else None
    for number in range(settings.max_retries + 1):
        if number and deadline is not None and time.perf_counter() > deadline:
            _no_time_for(record, number + 1, budget_s, started)
            break
        generation = GenerationRequest(
            messages=prompt,
            settings=profile.generation,
            tools=request.wire_tools,
            pass_tools=request.tc_mode == "builtin",
            response_schema=request.response_schema,
            purpose=request.purpose,
            conversation=request.messages,
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
        attempt = Attempt(number=number + 1)
        record.attempts.append(attempt)
        record.prompt = prompt
        try:
            completion = _complete(request, generation, force, deadline)
        except (BackendDeadline, DecisionTimeout) as exc:
            attempt.latency_ms = round((time.perf_counter() - attempt_started) * 1000, 1)
            _timed_out(record, attempt, budget_s or 0.0, started, exc)
            break
        except BackendError as exc:
            attempt.fail("backend_error", str(exc))
            record.error = attempt.error
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
        cut = cut_off(completion, generation.settings.max_new_tokens, request.purpose)
        context = ReplyContext(request, completion, cut, number == settings.max_retries)
        try:
            message, details = check_reply(context)
        except ParseError as exc:
            if cut:  # the text ends where the limit cut it, not where the model ended it
                attempt.fail("bad_reply", cut)
            else:
                kind = "unknown_tool" if exc.kind == "unknown_tool" else "parse_error"
                attempt.fail(kind, exc.reason, exc.kind)
        except UnusableReply as exc:
            attempt.fail(exc.kind, str(exc))
        except BadReply as exc:
            attempt.fail("bad_reply", str(exc))
        else:
            message = finish_reply(message, details, request)
            attempt.status, attempt.format = "success", details.get("format")
            record.status, record.ai_message, record.error = "success", message, None
            record.parse = {**details, "attempts": number + 1}
            break
        assert attempt.error is not None
        record.error = attempt.error
        if number == settings.max_retries:
            break
        attempt.corrective = _corrective(attempt.error.message, request.tc_mode)
        prompt = [
            *prompt,
            {"role": "assistant", "content": completion.text},
            {"role": "user", "content": attempt.corrective},
        ]
        if attempt.error.type == "bad_reply" and profile.generation.repeat_penalty < 1.15:
            # a loop or a copied text: retry with a repeat penalty as well as the reason
            penalised = generation.settings.model_copy(update={"repeat_penalty": 1.15})
            profile = profile.replace(generation=penalised)
    if record.status != "success" and _may_extract(
        record, request.purpose, request.has_results or bool(request.notes), request.call_required
    ):
        _extract(
            record, request.messages, request.backend, profile, request.answer_schema, request.notes
        )
    if record.status != "success":
        record.parse["attempts"] = len(record.attempts)
    record.latency_ms = round((time.perf_counter() - started) * 1000, 1)
    return record


def _corrective(error: str, mode: str) -> str:
    if mode == "builtin":
        how = "Call a tool in your native tool-call format, or answer in plain text."
    else:
        how = "Reply again with exactly one JSON object in the required format."
    return CORRECTIVE.format(error=error, how=how)


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
        refused = [a.raw_text for a in record.attempts if a.raw_text]
        extracted = extract_answer(
            messages, backend=backend, settings=profile.generation, refused=refused
        )
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
