"""The named reply checks (lokal.llm.replies.REPLY_CHECKS), each on its own (issue 22): the
decision in three steps is resolve_request -> run_attempts -> these checks."""

from __future__ import annotations

import pytest

from helpers import MODEL_CONFIG, basic_tools
from lokal.llm.backends import Completion
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.replies import (
    REPLY_CHECKS,
    BadReply,
    ReplyContext,
    UnusableReply,
    check_reply,
    finish_reply,
)
from lokal.llm.request import resolve_request
from lokal.messages import make_ai_message

QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]
CHECKS = dict(REPLY_CHECKS)


def request(**options):
    options.setdefault("tool_calling", "constrained")
    return resolve_request(
        MODEL_CONFIG, QUESTION, basic_tools(), backend=ScriptedBackend([]), **options
    )


def context(req, text="", cut=None, last=False, finish="stop"):
    return ReplyContext(req, Completion(text, 5, 5, finish), cut, last)


def call(name="calculator", **args):
    return make_ai_message("", [{"name": name, "args": args or {"expression": "2 + 2"}}])


def test_the_checks_run_in_a_fixed_named_order():
    assert [name for name, _ in REPLY_CHECKS] == [
        "cut_off",
        "required_call",
        "answer_format",
        "arguments",
        "plan_covers",
        "quality",
        "source",
    ]


def test_cut_off_refuses_a_call_cut_at_the_limit():
    req = request()
    with pytest.raises(BadReply, match="cut off"):
        CHECKS["cut_off"](call(), {}, context(req, cut="the reply was cut off at 256"))
    answer = make_ai_message("four")
    assert CHECKS["cut_off"](answer, {}, context(req, cut="cut off")) == answer


def test_required_call_refuses_an_answer():
    req = request(tool_choice="required")
    with pytest.raises(UnusableReply, match="a tool call is required"):
        CHECKS["required_call"](make_ai_message("4"), {}, context(req))
    assert CHECKS["required_call"](call(), {}, context(req)) == call()


def test_answer_format_compacts_json_and_refuses_text():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    req = request(response_format={"type": "json_schema", "json_schema": {"schema": schema}})
    ok = CHECKS["answer_format"](make_ai_message('{ "n": 4 }'), {}, context(req))
    assert ok["content"] == '{"n": 4}'
    with pytest.raises(UnusableReply, match="JSON"):
        CHECKS["answer_format"](make_ai_message("four"), {}, context(req))


def test_arguments_must_match_the_tool():
    req = request()
    with pytest.raises(UnusableReply, match="invalid arguments"):
        CHECKS["arguments"](call(expression=4), {}, context(req))
    assert CHECKS["arguments"](call(), {}, context(req)) == call()


def test_quality_refuses_a_placeholder_and_records_trims():
    req = request()
    with pytest.raises(BadReply):
        CHECKS["quality"](make_ai_message("<your answer>"), {}, context(req))
    details: dict = {}
    text = "The answer is four. The answer is four."
    kept = CHECKS["quality"](make_ai_message(text), details, context(req))
    assert kept["content"] == "The answer is four." and details["loop_trimmed"] is True


def test_source_says_model_for_an_answer_of_its_own():
    details: dict = {}
    CHECKS["source"](make_ai_message("It is four."), details, context(request()))
    assert details["answer_source"] == "model"


def test_check_reply_parses_then_checks_and_finish_merges_duplicates():
    req = request()
    text = (
        '{"tool_calls": [{"name": "calculator", "args": {"expression": "2 + 2"}}, '
        '{"name": "calculator", "args": {"expression": "2 + 2"}}]}'
    )
    message, details = check_reply(context(req, text))
    assert len(message["tool_calls"]) == 2
    message = finish_reply(message, details, req)
    assert len(message["tool_calls"]) == 1 and details["merged_duplicates"] == 1


def test_one_call_keeps_the_first_and_records_the_rest():
    req = request(parallel_tool_calls=False)
    two = make_ai_message(
        "",
        [
            {"name": "calculator", "args": {"expression": "1 + 1"}},
            {"name": "calculator", "args": {"expression": "2 + 2"}},
        ],
    )
    details: dict = {}
    message = finish_reply(two, details, req)
    assert len(message["tool_calls"]) == 1
    assert details["dropped_calls"] == [{"name": "calculator", "args": {"expression": "2 + 2"}}]


def test_the_request_is_resolved_once_with_the_legacy_mode_translated_at_the_door():
    planned = resolve_request(MODEL_CONFIG, QUESTION, basic_tools(), mode="plan_execute",
                              backend=ScriptedBackend([]))  # fmt: skip
    assert (planned.strategy, planned.purpose) == ("plan_execute", "plan")
    mocked = resolve_request(MODEL_CONFIG, QUESTION, basic_tools(), mode="mock")
    assert mocked.backend.name == "mock" and mocked.strategy == "react"
    final = request(tool_choice="none")
    assert final.purpose == "final" and final.tools == [] and final.tools_index == {}
    staged_on_a_backend_that_cannot_score = request(tool_calling="staged")
    assert staged_on_a_backend_that_cannot_score.tc_mode == "constrained"
    assert staged_on_a_backend_that_cannot_score.response_schema is not None
