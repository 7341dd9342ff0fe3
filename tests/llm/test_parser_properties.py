"""Properties of the output parser: it never fails with anything but ParseError, it stays fast
on hostile input, and calls written in any supported format read back as written.

The time bounds are safety bounds against exponential blow-up (catastrophic regex
backtracking, recursion, json_repair's quadratic corners), not performance targets.
"""

from __future__ import annotations

import json
import keyword
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import TEST_DATA
from lokal.errors import ParseError
from lokal.llm.parser import ParseResult, extract_json_values, parse_model_output
from lokal.messages import validate_ai_message

TOOLSETS = json.loads((TEST_DATA / "parser_tools.json").read_text("utf-8"))
BASIC = TOOLSETS["basic"]
BFCL = TOOLSETS["bfcl_math"]
TIME_BOUND = 5.0  # seconds, per hostile input, on a slow 2-core machine
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FRAGMENTS = [
    "{", "}", "[", "]", '"', "'", ":", ",", ";", "(", ")", "=", "\\", "`", "```", "```json\n",
    " ", "\n", "0", "7", "-1", "2.5", "true", "null", "None", "name", "arguments", "args",
    "content", "tool_calls", "tool", "function", "parameters", "file_reader", "calculator",
    "math.factorial", '"name"', '"arguments"', '"content"', '"tool_calls"', "<tool_call>",
    "</tool_call>", "<function=", "<function=calculator>", "</function>", "<parameter=",
    "<parameter=path>", "</parameter>", "<think>", "</think>", "<|python_tag|>",
    "[TOOL_CALLS]", "[ARGS]", "<|im_end|>", "//", "/*", "*/", "…", "好",
]  # fmt: skip
grammarish = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)
tools_choice = st.sampled_from([None, BASIC, BFCL])


def parse_or_error(text: str, tools=None, **options) -> ParseResult | ParseError:
    """The result, or the ParseError raised; any other exception fails the test."""
    try:
        result = parse_model_output(text, tools, **options)
    except ParseError as exc:
        assert isinstance(exc.reason, str) and exc.reason
        assert exc.__cause__ is None, f"a parser bug turned into ParseError: {exc.__cause__!r}"
        return exc
    validate_ai_message(result.message)
    return result


@FAST
@given(text=st.text(), tools=tools_choice)
def test_arbitrary_text_raises_nothing_but_parse_error(text, tools):
    parse_or_error(text, tools)


@FAST
@given(
    text=grammarish,
    tools=tools_choice,
    policy=st.sampled_from(["tool_calls", "content", "error"]),
    in_think=st.booleans(),
)
def test_grammar_like_text_raises_nothing_but_parse_error(text, tools, policy, in_think):
    parse_or_error(text, tools, conflict_policy=policy, calls_in_think=in_think)


@FAST
@given(text=st.one_of(st.text(), grammarish))
def test_extract_json_values_never_raises(text):
    for value, repaired in extract_json_values(text):
        assert isinstance(value, dict | list)
        assert isinstance(repaired, bool)


# --- calls read back as written -------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
# <think> tags are read before anything else (as reasoning parsers do), also inside strings.
texts = st.text(max_size=20).filter(lambda s: "think>" not in s)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)
calls = st.lists(
    st.fixed_dictionaries({"name": names, "args": st.dictionaries(names, json_values, max_size=4)}),
    min_size=1,
    max_size=4,
)


def read_back(text: str) -> list[dict]:
    result = parse_model_output(text)
    return [{"name": c["name"], "args": c["args"]} for c in result.message["tool_calls"]]


@pytest.mark.slow
@FAST
@given(calls=calls)
def test_envelope_calls_read_back_as_written(calls):
    text = json.dumps({"content": "", "tool_calls": calls}, ensure_ascii=False)
    assert read_back(text) == calls


@pytest.mark.slow
@FAST
@given(calls=calls, preamble=st.sampled_from(["", "Let me check.\n"]))
def test_hermes_calls_read_back_as_written(calls, preamble):
    blocks = [
        f"<tool_call>\n{json.dumps({'name': c['name'], 'arguments': c['args']})}\n</tool_call>"
        for c in calls
    ]
    assert read_back(preamble + "\n".join(blocks)) == calls


identifiers = names.filter(lambda name: not keyword.iskeyword(name))


@pytest.mark.slow
@FAST
@given(
    calls=st.lists(
        st.fixed_dictionaries(
            {"name": identifiers, "args": st.dictionaries(identifiers, json_values, max_size=4)}
        ),
        min_size=1,
        max_size=4,
    ),
    brackets=st.booleans(),
)
def test_pythonic_calls_read_back_as_written(calls, brackets):
    rendered = [
        f"{c['name']}({', '.join(f'{k}={v!r}' for k, v in c['args'].items())})" for c in calls
    ]
    text = f"[{', '.join(rendered)}]" if brackets or len(calls) > 1 else rendered[0]
    assert read_back(text) == calls


xml_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="<\r"), max_size=30
)


@FAST
@given(
    name=names,
    args=st.dictionaries(names, xml_text, min_size=1, max_size=4),
    closed=st.booleans(),
)
def test_qwen_xml_string_values_read_back_as_written(name, args, closed):
    schema = [
        {
            "name": name,
            "parameters": {"type": "object", "properties": {k: {"type": "string"} for k in args}},
        }
    ]
    params = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in args.items())
    text = f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    if not closed:  # truncated: the last closing tags are missing
        text = text.removesuffix("</parameter>\n</function>\n</tool_call>")
    result = parse_model_output(text, schema)
    assert result.message["tool_calls"][0]["args"] == args
    assert result.repaired is not closed


# --- hostile input --------------------------------------------------------------------------

MEGABYTE = 1_000_000
HOSTILE = {
    "1 MB of {": "{" * MEGABYTE,
    "1 MB of { after a word": "reply " + "{" * MEGABYTE,
    "100k nested [": "[" * 100_000,
    "100k nested [ after a word": "x " + "[" * 100_000,
    "1 MB of <tool_call>": "<tool_call>" * (MEGABYTE // 11),
    "1 MB of <function=": "<function=" * (MEGABYTE // 10),
    "1 MB of <parameter=": "<function=f>" + "<parameter=p>" * (MEGABYTE // 13),
    '1 MB of "': '"' * MEGABYTE,
    '1 MB of " after a word': 'x "' + '"' * MEGABYTE,
    "200k of a(": "a(" * 100_000,
    "1 MB of <think>": "<think>" * (MEGABYTE // 7),
    '1 MB of {"a": ': '{"a": ' * (MEGABYTE // 6),
    "1 MB of {'": "x {'" + "{'" * (MEGABYTE // 2),
    "1 MB unterminated string": '{"name": "f", "arguments": {"text": "' + "x" * MEGABYTE,
    "1 MB of <|python_tag|>{": "<|python_tag|>{" * (MEGABYTE // 15),
    "50k shallow json_repair worst case": "x {" + "a b c " * 8_000,
    "many small objects": '{"a": [1, {"b": "c"}]} ' * (MEGABYTE // 24),
    "deep parentheses under the ast bound": "f(" * 9_000 + ")" * 9_000,
    "calculator( repeated": "calculator(" * (MEGABYTE // 11),
    "1 MB of <|im_end|>": "ok" + "<|im_end|> " * (MEGABYTE // 11),
    "1 MB of ```": "```" * (MEGABYTE // 3),
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_input_returns_within_a_bound(text):
    for tools in (None, BASIC):
        start = time.perf_counter()
        parse_or_error(text, tools)
        extract_json_values(text)
        elapsed = time.perf_counter() - start
        assert elapsed < TIME_BOUND, f"{elapsed:.2f}s"
