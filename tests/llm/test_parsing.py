"""The output parser: a corpus of raw model outputs, then focused behaviours.

Corpus entries (tests/data/parser_corpus.json) carry ``expect`` with ``tool_calls`` (names and
args compared exactly), optionally ``format``, ``content``, ``preamble``, ``reasoning``,
``repaired``, ``conflict`` and ``ids``; or ``error`` (a substring of the ParseError reason).
The tool sets they name are in tests/data/parser_tools.json. tests/conftest.py prints the
recovery rate in the terminal summary.
"""

from __future__ import annotations

import json

import pytest

import lokal.llm.parser.values as coercion
from helpers import TEST_DATA
from lokal.errors import ConfigError, ParseError
from lokal.llm import parser as parsing
from lokal.llm.parser import (
    ParseResult,
    coerce_args,
    extract_json_values,
    parse_model_output,
    resolve_tool_name,
)
from lokal.llm.parser.read import tool_index as tools_by_name
from lokal.messages import validate_ai_message

DATA = TEST_DATA
CORPUS = json.loads((DATA / "parser_corpus.json").read_text(encoding="utf-8"))
TOOLSETS = json.loads((DATA / "parser_tools.json").read_text(encoding="utf-8"))
BASIC = TOOLSETS["basic"]
BFCL = TOOLSETS["bfcl_math"]
FORMATS = {
    "json_envelope",
    "hermes",
    "qwen_xml",
    "single_call",
    "call_list",
    "flat_tool",
    "function_wrapper",
    "python_tag",
    "pythonic",
    "prose",
}


def names_and_args(result: ParseResult) -> list[dict]:
    return [{"name": c["name"], "args": c["args"]} for c in result.message["tool_calls"]]


def exactly(value: object) -> str:
    """A spelling that tells 1 from 1.0 from True, which == does not."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# --- the corpus -----------------------------------------------------------------------------


def test_corpus_is_large_and_well_formed():
    assert len(CORPUS) >= 90
    assert len({entry["id"] for entry in CORPUS}) == len(CORPUS)
    for entry in CORPUS:
        assert entry["source"].strip(), entry["id"]
        assert entry["tools"] in (None, *TOOLSETS), entry["id"]
        expect = entry["expect"]
        assert ("error" in expect) != ("tool_calls" in expect or "format" in expect), entry["id"]
        assert expect.get("format", "prose") in FORMATS, entry["id"]
    kinds = {entry["expect"].get("format") for entry in CORPUS}
    assert kinds >= FORMATS, FORMATS - kinds
    assert sum("error" in entry["expect"] for entry in CORPUS) >= 10


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["id"] for entry in CORPUS])
def test_corpus_entry(entry, record_property):
    expect = entry["expect"]
    record_property("parser_corpus", "error" if "error" in expect else "recover")
    tools = TOOLSETS[entry["tools"]] if entry["tools"] else None
    options = {key: entry[key] for key in ("conflict_policy", "calls_in_think") if key in entry}
    if "error" in expect:
        with pytest.raises(ParseError) as caught:
            parse_model_output(entry["text"], tools, **options)
        assert expect["error"] in caught.value.reason
        record_property("parser_recovered", True)
        return
    result = parse_model_output(entry["text"], tools, **options)
    validate_ai_message(result.message)
    assert exactly(names_and_args(result)) == exactly(expect.get("tool_calls", []))
    if "content" in expect:
        assert result.message["content"] == expect["content"]
    record_property("parser_recovered", True)
    if "format" in expect:
        assert result.format == expect["format"]
    for key in ("preamble", "reasoning", "repaired", "conflict"):
        if key in expect:
            assert getattr(result, key) == expect[key], key
    if "ids" in expect:
        assert [call["id"] for call in result.message["tool_calls"]] == expect["ids"]


# --- Hermes and Qwen XML --------------------------------------------------------------------


def test_unclosed_tool_call_block_is_recovered():
    text = (
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+1"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "file_reader", "arguments": {"path": "notes.txt"}}'
    )
    result = parse_model_output(text, BASIC)
    assert result.format == "hermes"
    assert result.repaired is True
    assert [c["name"] for c in result.message["tool_calls"]] == ["calculator", "file_reader"]


def test_closing_tag_inside_a_json_string_does_not_cut_the_call():
    text = '<tool_call>{"name": "note", "arguments": {"text": "a </tool_call> b"}}</tool_call>'
    result = parse_model_output(text)
    assert names_and_args(result) == [{"name": "note", "args": {"text": "a </tool_call> b"}}]


def test_qwen_xml_missing_closing_tags_are_tolerated():
    text = "<tool_call>\n<function=file_reader>\n<parameter=path>\na.txt\n<parameter=max_chars>\n9"
    result = parse_model_output(text, BASIC)
    assert names_and_args(result) == [
        {"name": "file_reader", "args": {"path": "a.txt", "max_chars": 9}}
    ]
    assert result.repaired is True


def test_qwen_xml_value_loses_exactly_one_newline_on_each_side():
    text = "<function=note>\n<parameter=text>\n\n  blank-edged  \n\n</parameter>\n</function>"
    result = parse_model_output(text)
    assert result.message["tool_calls"][0]["args"] == {"text": "\n  blank-edged  \n"}


def test_qwen_xml_values_follow_the_schema_types():
    schema = [
        {
            "name": "configure",
            "parameters": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "enabled": {"type": "boolean"},
                    "nothing": {"type": "null"},
                    "options": {"type": "object"},
                    "tags": {"type": "array", "items": {"type": "integer"}},
                    "label": {"type": "string"},
                },
            },
        }
    ]
    params = {
        "count": "5",
        "ratio": "2.5",
        "enabled": "true",
        "nothing": "null",
        "options": '{"a": 1}',
        "tags": '["1", 2]',
        "label": "123",
    }
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    result = parse_model_output(f"<tool_call>\n<function=configure>\n{body}</function>", schema)
    assert result.message["tool_calls"][0]["args"] == {
        "count": 5,
        "ratio": 2.5,
        "enabled": True,
        "nothing": None,
        "options": {"a": 1},
        "tags": [1, 2],
        "label": "123",
    }


def test_qwen_xml_values_without_schema_decode_only_json_non_strings():
    body = "".join(
        f"<parameter={k}>\n{v}\n</parameter>\n"
        for k, v in {
            "n": "7",
            "b": "true",
            "o": '{"x": [1]}',
            "s": "hello",
            "q": '"quoted"',
        }.items()
    )
    result = parse_model_output(f"<function=f>\n{body}</function>")
    assert result.message["tool_calls"][0]["args"] == {
        "n": 7,
        "b": True,
        "o": {"x": [1]},
        "s": "hello",
        "q": '"quoted"',
    }


# --- the JSON envelope and conflicts --------------------------------------------------------

CONFLICT = (
    '{"content": "I will compute 3.14 * 5 - 2.5 = 13.2", "tool_calls": '
    '[{"id": "call_001", "name": "calculator", "args": {"expression": "3.14 * 5 - 2.5"}}]}'
)


def test_conflict_policy_tool_calls_keeps_calls_and_records_the_text():
    result = parse_model_output(CONFLICT, BASIC)
    assert result.conflict is True
    assert result.message["content"] == ""
    assert result.preamble == "I will compute 3.14 * 5 - 2.5 = 13.2"
    assert [c["name"] for c in result.message["tool_calls"]] == ["calculator"]


def test_conflict_policy_content_drops_calls_into_record():
    result = parse_model_output(CONFLICT, BASIC, conflict_policy="content")
    assert result.conflict is True
    assert result.message == {
        "role": "assistant",
        "content": "I will compute 3.14 * 5 - 2.5 = 13.2",
        "tool_calls": [],
    }
    assert result.dropped_calls == [
        {"id": "call_001", "name": "calculator", "args": {"expression": "3.14 * 5 - 2.5"}}
    ]


def test_conflict_policy_error_raises():
    with pytest.raises(ParseError, match="both content and tool_calls"):
        parse_model_output(CONFLICT, BASIC, conflict_policy="error")


def test_unknown_conflict_policy_is_the_callers_mistake():
    with pytest.raises(ConfigError):
        parse_model_output(CONFLICT, BASIC, conflict_policy="whatever")


def test_envelope_with_neither_content_nor_calls_is_an_error():
    with pytest.raises(ParseError, match="neither content nor tool_calls"):
        parse_model_output('{"content": "", "tool_calls": []}')


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ('{"content": "All done."}', "All done.", []),
        (
            '{"tool_calls": [{"name": "calculator", "args": {"expression": "1"}}]}',
            "",
            ["calculator"],
        ),
    ],
)
def test_constrained_decoding_shapes_parse(text, content, calls):
    result = parse_model_output(text, BASIC)
    assert result.format == "json_envelope"
    assert result.message["content"] == content
    assert [c["name"] for c in result.message["tool_calls"]] == calls


def test_missing_ids_are_numbered_and_given_ids_are_kept():
    text = json.dumps(
        {
            "tool_calls": [
                {"name": "calculator", "args": {"expression": "1"}},
                {"id": "mine", "name": "calculator", "args": {"expression": "2"}},
                {"name": "calculator", "args": {"expression": "3"}},
            ]
        }
    )
    ids = [call["id"] for call in parse_model_output(text).message["tool_calls"]]
    assert ids == ["call_001", "mine", "call_003"]


@pytest.mark.parametrize(
    "call",
    [
        {"id": "c1", "name": "calculator", "args": {"expression": "2+2"}},
        {"name": "calculator", "arguments": {"expression": "2+2"}},
        {"name": "calculator", "parameters": {"expression": "2+2"}},
        {"function": {"name": "calculator", "arguments": '{"expression": "2+2"}'}},
        {
            "type": "function",
            "function": {"name": "calculator", "arguments": {"expression": "2+2"}},
        },
        {"name": "calculator", "arguments": json.dumps(json.dumps({"expression": "2+2"}))},
    ],
)
def test_every_call_shape_inside_the_envelope_is_read(call):
    result = parse_model_output(json.dumps({"content": "", "tool_calls": [call]}), BASIC)
    assert names_and_args(result) == [{"name": "calculator", "args": {"expression": "2+2"}}]


@pytest.mark.parametrize("arguments", [None, ""])
def test_missing_arguments_mean_no_arguments(arguments):
    text = json.dumps({"tool_calls": [{"name": "now", "arguments": arguments}]})
    assert parse_model_output(text).message["tool_calls"][0]["args"] == {}


@pytest.mark.parametrize("arguments", [5, ["a"], '"text"', "not json"])
def test_arguments_that_are_not_an_object_are_an_error(arguments):
    text = json.dumps(
        {"content": "", "tool_calls": [{"name": "calculator", "arguments": arguments}]}
    )
    with pytest.raises(ParseError, match="arguments of 'calculator'"):
        parse_model_output(text, BASIC)


def test_several_candidates_take_the_first_that_is_a_message():
    text = (
        'Input looks like {"path": "x"}; and [1, 2]. Answer:\n```json\n'
        '{"content": "", "tool_calls": [{"name": "file_reader", "args": {"path": "x"}}]}\n```'
    )
    result = parse_model_output(text, BASIC)
    assert result.format == "json_envelope"
    assert names_and_args(result) == [{"name": "file_reader", "args": {"path": "x"}}]
    assert result.preamble.startswith("Input looks like")


def test_repair_runs_only_after_strict_json_fails(monkeypatch):
    calls = []

    def spy(*args, **kwargs):
        calls.append(args)
        return {}

    monkeypatch.setattr(coercion, "repair_json", spy)
    result = parse_model_output('{"content": "", "tool_calls": [{"name": "f", "args": {}}]}')
    assert result.repaired is False
    assert calls == []
    monkeypatch.undo()
    result = parse_model_output("{'content': '', 'tool_calls': [{'name': 'f', 'args': {}}]}")
    assert result.repaired is True


def test_truncated_json_is_closed_by_repair():
    text = '{"content": "", "tool_calls": [{"name": "file_reader", "args": {"path": "a.md"'
    result = parse_model_output(text, BASIC)
    assert result.repaired is True
    assert names_and_args(result) == [{"name": "file_reader", "args": {"path": "a.md"}}]


# --- names and coercion ---------------------------------------------------------------------


def test_name_normalisation_matches_exactly_one_tool():
    tools = tools_by_name(BASIC + BFCL)
    assert resolve_tool_name("file_reader", tools) == "file_reader"
    assert resolve_tool_name("File_Reader", tools) == "file_reader"
    assert resolve_tool_name("file-reader", tools) == "file_reader"
    assert resolve_tool_name("FILE.READER", tools) == "file_reader"
    assert resolve_tool_name("math_factorial", tools) == "math.factorial"
    assert resolve_tool_name("functions.calculator", tools) == "calculator"


def test_ambiguous_name_is_an_error_naming_the_candidates():
    tools = tools_by_name(TOOLSETS["bfcl_clash"])
    assert resolve_tool_name("math_factorial", tools) == "math_factorial"  # exact wins
    with pytest.raises(ParseError, match="ambiguous") as caught:
        resolve_tool_name("Math-Factorial", tools)
    assert "math.factorial" in caught.value.reason and "math_factorial" in caught.value.reason


def test_unknown_tool_error_names_the_available_tools():
    with pytest.raises(ParseError) as caught:
        parse_model_output('{"name": "web_search", "arguments": {"q": "x"}}', BASIC)
    reason = caught.value.reason
    assert "web_search" in reason
    assert all(name in reason for name in ("file_reader", "calculator", "table_analyzer"))


def test_without_tools_any_name_is_accepted():
    assert resolve_tool_name(" anything ", {}) == "anything"
    with pytest.raises(ParseError):
        resolve_tool_name("  ", {})


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "integer"}, "5", 5),
        ({"type": "integer"}, "5.0", 5),
        ({"type": "integer"}, 5.0, 5),
        ({"type": "integer"}, "5.5", "5.5"),
        ({"type": "integer"}, "007", "007"),
        ({"type": "integer"}, True, True),
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "number"}, 5, 5),
        ({"type": "number"}, "NaN", "NaN"),
        ({"type": "boolean"}, "true", True),
        ({"type": "boolean"}, "False", False),
        ({"type": "boolean"}, "yes", "yes"),
        ({"type": "boolean"}, 1, 1),
        ({"type": "null"}, "null", None),
        ({"type": "object"}, '{"a": 1}', {"a": 1}),
        ({"type": "object"}, "[1]", "[1]"),
        ({"type": "array"}, "[1, 2]", [1, 2]),
        ({"type": "string"}, 2000, "2000"),
        ({"type": "string"}, 2.5, "2.5"),
        ({"type": "string"}, True, True),
        ({"type": "string"}, None, None),
        ({"type": ["integer", "null"]}, "null", None),
        ({"type": ["string", "integer"]}, "5", "5"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "12", 12),
        ({}, "5", "5"),
    ],
)
def test_coerce_args_converts_only_where_nothing_is_lost(schema, value, expected):
    coerced = coerce_args({"x": value}, {"type": "object", "properties": {"x": schema}})
    assert coerced == {"x": expected}
    assert type(coerced["x"]) is type(expected)


def test_coerce_args_follows_nested_objects_and_array_items():
    schema = {
        "type": "object",
        "properties": {
            "point": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "sizes": {"type": "array", "items": {"type": "number"}},
            "names": {"type": "array", "items": {"type": "string"}},
        },
    }
    args = {"point": '{"x": "3"}', "sizes": ["1.5", 2], "names": [1, "b"], "extra": "5"}
    assert coerce_args(args, schema) == {
        "point": {"x": 3},
        "sizes": [1.5, 2],
        "names": ["1", "b"],
        "extra": "5",
    }
    assert args["sizes"] == ["1.5", 2]  # the input is not changed


def test_coerce_args_reads_bfcl_type_names():
    schema = {"type": "dict", "properties": {"r": {"type": "float"}, "t": {"type": "tuple"}}}
    assert coerce_args({"r": "0.5", "t": "[1, 2]"}, schema) == {"r": 0.5, "t": [1, 2]}


# --- pythonic calls -------------------------------------------------------------------------


def test_pythonic_values_are_literals_only(tmp_path):
    marker = tmp_path / "ran"
    payloads = [
        f"[get_weather(city=__import__('pathlib').Path({str(marker)!r}).write_text('x'))]",
        f"__import__('pathlib').Path({str(marker)!r}).write_text('x')",
        "[get_weather(city=open('/etc/passwd').read())]",
        "[get_weather(city=CITY)]",
        "[get_weather(city=[c for c in 'ab'])]",
        "[get_weather(**{'city': 'Paris'})]",
    ]
    for text in payloads:
        for tools in (None, BFCL):
            result = parse_model_output(text, tools)
            assert result.format == "prose", text
            assert result.message["tool_calls"] == []
    assert not marker.exists()


def test_pythonic_prose_with_parentheses_stays_prose():
    for text in (
        "I think (maybe) so",
        "Call me (later).",
        "f(x) grows fast",
        "print(x=1) and more",
    ):
        assert parse_model_output(text, BFCL).format == "prose", text


def test_pythonic_positional_arguments_follow_schema_order_and_need_a_schema():
    result = parse_model_output("[calculate_triangle_area(3, 4, 'cm')]", BFCL)
    assert names_and_args(result) == [
        {"name": "calculate_triangle_area", "args": {"base": 3, "height": 4, "unit": "cm"}}
    ]
    assert parse_model_output("[calculate_triangle_area(3, 4)]").format == "prose"
    assert parse_model_output("[calculate_triangle_area(1, 2, 3, 4)]", BFCL).format == "prose"


def test_pythonic_dotted_names_and_embedded_calls():
    result = parse_model_output("Sure: [math.factorial(number=5)] is what I need.", BFCL)
    assert result.format == "pythonic"
    assert names_and_args(result) == [{"name": "math.factorial", "args": {"number": 5}}]
    assert "Sure:" in result.preamble and "what I need" in result.preamble


# --- think blocks, prose and errors ---------------------------------------------------------


def test_think_blocks_are_removed_and_kept_as_reasoning():
    result = parse_model_output("<think>first</think>Answer <think>second</think>here.")
    assert result.message["content"] == "Answer here."
    assert result.reasoning == "first\n\nsecond"


def test_text_before_a_lone_closing_think_tag_is_reasoning():
    result = parse_model_output("planning the reply\n</think>\n\nHello!")
    assert result.message["content"] == "Hello!"
    assert result.reasoning == "planning the reply"


def test_calls_inside_think_are_ignored_unless_asked_for():
    call = '{"name": "calculator", "arguments": {"expression": "1"}}'
    text = f"<think><tool_call>{call}</tool_call></think>"
    with pytest.raises(ParseError, match="only reasoning"):
        parse_model_output(text, BASIC)
    result = parse_model_output(text, BASIC, calls_in_think=True)
    assert [c["name"] for c in result.message["tool_calls"]] == ["calculator"]
    outside = text + "The answer is 1."
    assert parse_model_output(outside, BASIC, calls_in_think=False).format == "prose"


@pytest.mark.parametrize(
    "text", ["", "   ", "}", "```", "...", "[]", "{}", "``` ```", "<|im_end|>"]
)
def test_empty_or_punctuation_only_replies_are_errors(text):
    with pytest.raises(ParseError) as caught:
        parse_model_output(text)
    assert caught.value.reason
    assert caught.value.text == text


@pytest.mark.parametrize(
    "text",
    [
        "The capital of France is Paris.",
        "A set looks like {1, 2, 3} and a dict like {'a': 1}.",
        'Return {"status": "ok"} on success.',
        "See [1] and [the docs](https://example.com).",
        "Use {name} as a placeholder; {count} too.",
        '{"answer": 42}',
        "👍",
    ],
)
def test_prose_is_a_final_answer(text):
    result = parse_model_output(text, BASIC)
    assert result.format == "prose"
    assert result.message == {"role": "assistant", "content": text, "tool_calls": []}


def test_results_are_valid_ai_messages_with_a_known_format():
    for entry in CORPUS:
        if "error" in entry["expect"]:
            continue
        tools = TOOLSETS[entry["tools"]] if entry["tools"] else None
        options = {key: entry[key] for key in ("conflict_policy", "calls_in_think") if key in entry}
        result = parse_model_output(entry["text"], tools, **options)
        assert validate_ai_message(result.message) is result.message
        assert result.format in FORMATS


def test_only_the_documented_names_are_public():
    assert sorted(parsing.__all__) == [
        "ParseResult",
        "coerce_args",
        "extract_json_values",
        "parse_model_output",
        "resolve_tool_name",
    ]


# --- extract_json_values --------------------------------------------------------------------


def test_extract_json_values_finds_fenced_and_embedded():
    text = (
        'First {"a": 1} then a fence:\n```json\n{"b": [1, 2]}\n```\n'
        'and a list [{"c": 3}] and a trailing one {"d": 4}```'
    )
    assert extract_json_values(text) == [
        ({"a": 1}, False),
        ({"b": [1, 2]}, False),
        ([{"c": 3}], False),
        ({"d": 4}, False),
    ]


def test_extract_json_values_repairs_almost_json_in_order():
    text = "plan: {'steps': [1, 2,],} and later {\"ok\": true}"
    assert extract_json_values(text) == [({"steps": [1, 2]}, True), ({"ok": True}, False)]


def test_extract_json_values_on_whole_text_and_nothing():
    assert extract_json_values(' [1, {"x": null}] ') == [([1, {"x": None}], False)]
    assert extract_json_values("no json here") == []
    assert extract_json_values("") == []
