import json

import pytest

from lokal.errors import MessageError
from lokal.messages import (
    from_openai_message,
    make_ai_message,
    make_tool_message,
    read_tool_result,
    to_openai_message,
    validate_ai_message,
)


def test_missing_ids_are_assigned_in_call_order():
    message = make_ai_message("", [{"name": "a", "args": {}}, {"name": "b", "args": {"x": 1}}])
    assert [c["id"] for c in message["tool_calls"]] == ["call_001", "call_002"]


def test_given_ids_are_kept_and_duplicates_replaced():
    message = make_ai_message(
        "", [{"id": "x1", "name": "a", "args": {}}, {"id": "x1", "name": "b", "args": {}}]
    )
    assert [c["id"] for c in message["tool_calls"]] == ["x1", "call_002"]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"role": "user", "content": "x", "tool_calls": []}, "role 'assistant'"),
        ({"role": "assistant", "content": 3, "tool_calls": []}, "content must be a string"),
        ({"role": "assistant", "content": "", "tool_calls": []}, "needs content or"),
        (
            {
                "role": "assistant",
                "content": "hi",
                "tool_calls": [{"id": "c", "name": "f", "args": {}}],
            },
            "not both",
        ),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "name": "", "args": {}}],
            },
            "name must be a non-empty string",
        ),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "name": "f", "args": []}],
            },
            "args must be an object",
        ),
    ],
)
def test_invalid_ai_messages_get_clear_errors(message, reason):
    with pytest.raises(MessageError, match=reason):
        validate_ai_message(message)


def test_openai_round_trip_keeps_calls_and_encodes_arguments_as_json_string():
    message = make_ai_message("", [{"name": "calculator", "args": {"expression": "2+2"}}])
    converted = to_openai_message(message)
    function = converted["tool_calls"][0]["function"]
    assert function["arguments"] == '{"expression": "2+2"}'
    assert converted["tool_calls"][0]["type"] == "function"
    assert from_openai_message(converted) == message


def test_from_openai_rejects_malformed_arguments():
    bad = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{oops"}}],
    }
    with pytest.raises(MessageError, match="not valid JSON"):
        from_openai_message(bad)


def test_tool_message_content_is_json_of_status_output_error():
    call = {"id": "call_001", "name": "calculator", "args": {}}
    ok = make_tool_message(call, output={"result": 4})
    failed = make_tool_message(call, error="division by zero")
    assert ok["status"] == "success" and failed["status"] == "error"
    assert json.loads(ok["content"]) == {
        "status": "success",
        "output": {"result": 4},
        "error": None,
    }
    assert read_tool_result(failed)["error"] == "division by zero"
    assert to_openai_message(ok) == {
        "role": "tool",
        "tool_call_id": "call_001",
        "content": ok["content"],
        "name": "calculator",
    }


def test_plain_text_tool_content_is_read_as_output():
    message = {
        "role": "tool",
        "tool_call_id": "c",
        "name": "f",
        "status": "success",
        "content": "25 degrees",
    }
    assert read_tool_result(message) == {"status": "success", "output": "25 degrees", "error": None}


def test_a_call_has_one_identity_everywhere():
    """Call identity is computed in one place (issue 22): the runtime's repeated-call guard,
    the staged engine and the merging of identical calls in a reply all use it."""
    import ast
    from pathlib import Path

    from lokal.messages import call_key

    a = call_key("search", {"b": 1, "a": {"y": [1, 2], "x": "é"}})
    assert a == call_key("search", '{"a": {"x": "é", "y": [1, 2]}, "b": 1}')
    assert a != call_key("search", {"b": 1, "a": {"y": [2, 1], "x": "é"}})
    assert call_key("f", "{not json") == "f {not json"
    src = Path(__file__).resolve().parents[2] / "src" / "lokal"
    for module in ("runtime.py", "llm/staged/engine.py", "llm/replies.py", "llm/request.py"):
        tree = ast.parse((src / module).read_text(encoding="utf-8"))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not {d for d in defined if "call_key" in d}, module  # no second definition
        imported = {
            alias.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module == "lokal.messages"
            for alias in n.names
        }
        assert "call_key" in imported, module
