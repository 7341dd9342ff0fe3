"""``trace_to_otlp`` gives, for the same trace, the same OTLP JSON as it did when
``tests/data/otlp/golden.json`` was written: the two recorded runs (with and without contents)
and three hand-written traces that reach what the recorded runs do not (guards, a tool that
never ends, a run without ``final``, a failed decision without ``decision_start``, timeouts,
calls without an id, a run that gave no answer…).

The only value that is not a function of the trace, lokal's version, is normalised. To write
the file again (only after a change of the output that is meant):
``PYTHONPATH=tests:tests/viewer .venv/bin/python -c
"import test_viewer_otlp_golden as t; t.write_golden()"``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from otlp_traces import branches_trace, no_answer_trace, unfinished_trace

from helpers import TEST_DATA
from lokal.errors import LokalError
from lokal.trace import read_trace
from lokal.viewer.otlp import trace_to_otlp

GOLDEN = TEST_DATA / "otlp" / "golden.json"
TRACES = TEST_DATA / "traces"
VERSION = "<version>"


def _cases() -> dict[str, dict[str, Any]]:
    bundled = read_trace(TRACES / "bundled_run.jsonl")
    scripted = read_trace(TRACES / "scripted_run.jsonl")
    cases = {
        "bundled": trace_to_otlp(bundled),
        "bundled+content": trace_to_otlp(bundled, include_content=True),
        "scripted": trace_to_otlp(scripted),
        "scripted+content": trace_to_otlp(iter(scripted), include_content=True),
        "branches": trace_to_otlp(branches_trace(), service_name="svc"),
        "branches+content": trace_to_otlp(branches_trace(), include_content=True),
        "unfinished+content": trace_to_otlp(unfinished_trace(), include_content=True),
        "no_answer+content": trace_to_otlp(no_answer_trace(), include_content=True),
    }
    return {name: _normalised(request) for name, request in cases.items()}


def _normalised(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with lokal's version (of the installed distribution) replaced."""
    request = json.loads(json.dumps(request))
    for block in request["resourceSpans"]:
        for attribute in block["resource"]["attributes"]:
            if attribute["key"] == "service.version":
                attribute["value"] = {"stringValue": VERSION}
        for scope in block["scopeSpans"]:
            scope["scope"]["version"] = VERSION
    return request


def golden_outputs() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name",
    [
        "bundled",
        "bundled+content",
        "scripted",
        "scripted+content",
        "branches",
        "branches+content",
        "unfinished+content",
        "no_answer+content",
    ],
)
def test_the_export_matches_the_saved_one(name):
    expected, actual = golden_outputs(), _cases()
    assert list(expected) == list(actual)
    # as text: the order of the keys is kept too
    assert json.dumps(actual[name], indent=1) == json.dumps(expected[name], indent=1)


def test_the_hand_written_traces_reach_the_rare_paths():
    """The saved outputs hold what the hand-written traces are there for."""
    saved = golden_outputs()
    text = json.dumps(saved["branches+content"])
    for needle in ("lokal.guard", "unfinished", "timeout", "tool_error", "no_answer"):
        assert needle in text
    spans = saved["unfinished+content"]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert spans[0]["name"] == "invoke_agent lokal" and "status" not in spans[0]
    assert [s["name"] for s in spans[1:]] == ["execute_tool clock", "execute_tool None"]
    assert "links" not in spans[1] and "links" not in spans[2]


def test_a_trace_without_run_start_is_refused():
    with pytest.raises(LokalError, match="no run_start"):
        trace_to_otlp([{"type": "decision", "time": 1.0}])


def write_golden() -> None:
    """Save the current outputs as the expected ones (see the module docstring)."""
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_cases(), indent=1, ensure_ascii=False)
    GOLDEN.write_text(text + "\n", encoding="utf-8")
