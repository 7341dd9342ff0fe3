"""Hand-written traces for the OTLP export tests: the paths the recorded runs do not take
(guards, a tool that never ends, a run without ``final``, a failed decision without
``decision_start``, timeouts, calls without an id, a run that gave no answer…)."""

from __future__ import annotations

from typing import Any


def branches_trace() -> list[dict[str, Any]]:
    """A run with the rare paths: an embeddings load only (the model is the profile), a failed
    decision without ``decision_start`` (its start from ``latency_ms``), failed attempts, tool
    and system messages in the prompt, guards, a tool error with no type, a timed-out reused
    call without an id, a call that never ends, and a final without an answer."""
    question = "What is in a.txt?"
    return [
        {
            "type": "run_start",
            "time": 100.0,
            "question": question,
            "profile": "mock-profile",
            "strategy": "react",
            "tools": ("reader", "clock"),
        },
        {"type": "model_load", "time": 100.1, "model": "MiniLM", "component": "embeddings"},
        {
            "type": "decision",
            "time": 101.0,
            "latency_ms": 400,
            "iteration": 1,
            "purpose": "decide",
            "status": "error",
            "error": {"type": "ParseError", "message": "no JSON"},
            "usage": {"prompt_tokens": 30},
            "tool_calling": "json",
            "parse": {"format": "json", "repaired": True},
            "attempts": [
                {
                    "attempt": 1,
                    "error": {"type": "ParseError", "message": "bad", "parse_kind": "json"},
                    "raw_text": "{oops",
                },
                {"attempt": 2, "finish_reason": "length", "raw_text": "x"},
                {"attempt": 3, "error": {"message": "untyped"}, "finish_reason": "length"},
            ],
            "prompt": [
                {"role": "system", "content": None},
                {"content": question},
                {"role": "tool", "tool_call_id": "c0", "content": "not json"},
                {"role": "tool", "tool_call_id": "c00", "content": '{"ok": 1}'},
                {"role": "tool", "tool_call_id": "c000", "content": None},
                {
                    "role": "assistant",
                    "content": ["a", "list"],
                    "tool_calls": [{"id": "c0", "name": "reader", "arguments": "{}"}],
                },
            ],
            "ai_message": None,
        },
        {"type": "guard", "time": 101.2, "guard": "repeated_call", "iteration": 1, "times": 2},
        {"type": "decision_start", "time": 101.5, "iteration": 2, "purpose": "decide"},
        {
            "type": "decision",
            "time": 102.0,
            "iteration": 2,
            "purpose": "decide",
            "status": "success",
            "usage": {"prompt_tokens": 40, "completion_tokens": 5},
            "attempts": [{"attempt": 1}],
            "prompt": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": question},
            ],
            "ai_message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "name": "reader", "args": {"path": "a.txt"}},
                    {"name": "clock", "args": {}},
                    {"id": "c3", "name": "reader", "args": {"path": "b.txt"}},
                ],
            },
        },
        {
            "type": "tool_start",
            "time": 102.1,
            "iteration": 2,
            "index": 0,
            "call_id": "c1",
            "name": "reader",
        },
        {
            "type": "tool_end",
            "time": 102.3,
            "iteration": 2,
            "index": 0,
            "call_id": "c1",
            "name": "reader",
            "args": {"path": "a.txt"},
            "start_time": 102.1,
            "end_time": 102.3,
            "status": "error",
            "error": "it broke: badly",
            "timed_out": False,
            "message": {"role": "tool", "content": None},
        },
        {
            "type": "tool_end",
            "time": 102.6,
            "iteration": 2,
            "index": 1,
            "call_id": None,
            "name": "clock",
            "start_time": 102.1,
            "status": "error",
            "error": "TimeoutError: slow",
            "timed_out": True,
            "reused": True,
            "message": {"role": "tool", "content": "partial"},
        },
        {
            "type": "tool_start",
            "time": 102.2,
            "iteration": 2,
            "index": 2,
            "call_id": "c3",
            "name": "reader",
            "args": {"path": "b.txt"},
            "start_time": 102.2,
        },
        {"type": "guard", "time": 103.0, "guard": "time_budget", "budget_s": 2.5},
        {
            "type": "final",
            "time": 103.5,
            "status": "stopped",
            "answer": "",
            "answered": False,
            "stop_reason": "time budget",
            "iterations": 2,
            "usage": {"prompt_tokens": 70},
        },
    ]


def unfinished_trace() -> list[dict[str, Any]]:
    """A run cut short: a tool before any decision (no link), one still running, a
    ``decision_start`` without its decision, a chat model load, and no ``final``."""
    return [
        {"type": "run_start", "time": 50.0, "question": "hi"},
        {"type": "model_load", "time": 50.2, "model": "embedder", "component": "embeddings"},
        {"type": "model_load", "time": 50.5, "model": "Chat-1B"},
        {
            "type": "tool_start",
            "time": 51.0,
            "iteration": 0,
            "index": 0,
            "call_id": "early",
            "name": "clock",
        },
        {
            "type": "tool_end",
            "time": 51.5,
            "iteration": 0,
            "index": 0,
            "call_id": "early",
            "name": "clock",
            "status": None,
            "start_time": 51.0,
            "end_time": 51.4,
        },
        {"type": "tool_start", "time": 52.0, "iteration": 1, "index": 0, "call_id": "x"},
        {"type": "decision_start", "time": 53.0, "iteration": 1},
        {"type": "something_else", "time": 54.0},
    ]


def no_answer_trace() -> list[dict[str, Any]]:
    """A final that did not answer and gives no stop reason; a decision without a time."""
    return [
        {"type": "run_start", "time": 10.0, "question": "?", "profile": "p"},
        {"type": "decision_start", "time": 10.5},
        {"type": "decision", "status": "success", "latency_ms": 100, "attempts": []},
        {"type": "final", "time": 12.0, "answered": False, "usage": None},
    ]
