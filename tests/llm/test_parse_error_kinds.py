"""Every parse error says what sort of problem it is (``ParseError.kind``), and a decision
tells an unknown tool from other parse errors by that kind, not by the wording."""

import json

import pytest

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.errors import PARSE_ERROR_KINDS, ParseError
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.decide import generate_ai_message
from lokal.llm.parser import parse_model_output

TOOLS = [
    {"name": "file_reader", "parameters": {"properties": {"path": {"type": "string"}}}},
    {"name": "file_writer", "parameters": {"properties": {}}},
]
CALL = {"name": "file_reader", "args": {"path": "a"}}


@pytest.mark.parametrize(
    ("text", "kind", "policy"),
    [
        ("", "no_reply", "tool_calls"),
        ("...", "no_reply", "tool_calls"),
        ("<tool_call>nonsense</tool_call>", "not_a_call", "tool_calls"),
        ('{"name": "file_reader", "arguments": "[1, 2]"}', "invalid_arguments", "tool_calls"),
        ('{"name": "web_search", "arguments": {}}', "unknown_tool", "tool_calls"),
        (json.dumps({"content": "It is 4.", "tool_calls": [CALL]}), "conflict", "error"),
        (json.dumps({"tool_calls": [CALL] * 65}), "too_many", "tool_calls"),
    ],
)
def test_each_parse_error_has_its_kind(text, kind, policy):
    with pytest.raises(ParseError) as error:
        parse_model_output(text, TOOLS, conflict_policy=policy)
    assert error.value.kind == kind
    assert error.value.kind in PARSE_ERROR_KINDS


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        ParseError("x", kind="no_such_kind")


def test_a_decision_reports_the_kind_of_each_failed_attempt():
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=1)
    backend = ScriptedBackend(['{"name": "web_search", "arguments": {}}', ""])
    result = generate_ai_message(
        profile, [{"role": "user", "content": "read a"}], TOOLS, backend=backend
    )
    first, second = result.attempts
    assert (first.error.type, first.error.parse_kind) == ("unknown_tool", "unknown_tool")
    assert (second.error.type, second.error.parse_kind) == ("parse_error", "no_reply")
    # the corrective message is part of the failed attempt's record, and is what was sent
    assert first.corrective and "web_search" in first.corrective
    assert backend.requests[1].messages[-1]["content"] == first.corrective
    assert second.corrective is None  # nothing was sent after the last attempt
    assert result.to_dict()["attempts"][0]["error"]["parse_kind"] == "unknown_tool"
