"""ToolRegistry: registration, validation, execution, timeouts, concurrency and events."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lokal.messages import read_tool_result, validate_tool_message
from lokal.tools import ToolRegistry, tool


def file_reader(path: str, max_chars: int = 2000) -> dict[str, Any]:
    """Read a file.

    Args:
        path: The path.
        max_chars: Maximum characters.
    """
    return {"path": path, "max_chars": max_chars}


def failing(x: int) -> int:
    """Always fails."""
    raise ValueError(f"bad x {x}")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([file_reader, failing])


def _result(message: dict[str, Any]) -> dict[str, Any]:
    validate_tool_message(message)
    result = read_tool_result(message)
    assert result["status"] == message["status"]
    return result


def test_register_names_get_and_schemas(registry: ToolRegistry) -> None:
    assert registry.names() == ["file_reader", "failing"]
    assert "file_reader" in registry and len(registry) == 2
    assert registry.get("file_reader").name == "file_reader"
    with pytest.raises(KeyError, match="Available tools: file_reader, failing"):
        registry.get("nope")
    with pytest.raises(ValueError, match="already registered"):
        registry.register(file_reader)
    registry.register(file_reader, name="reader2", timeout=3)
    assert registry.get("reader2").timeout == 3
    openai = registry.schemas()
    assert openai[0]["type"] == "function"
    assert openai[0]["function"]["name"] == "file_reader"
    flat = registry.schemas("flat")
    assert [s["name"] for s in flat] == ["file_reader", "failing", "reader2"]
    assert flat[0]["parameters"]["required"] == ["path"]
    registry.unregister("reader2")
    assert "reader2" not in registry


def test_validate_gives_readable_messages(registry: ToolRegistry) -> None:
    assert registry.validate("file_reader", {"path": "a.txt", "max_chars": 10}) is None
    assert (
        registry.validate("file_reader", {"path": "a.txt", "max_chars": "abc"})
        == "argument 'max_chars' must be integer, got 'abc'"
    )
    assert registry.validate("file_reader", {}) == "missing required argument 'path'"
    message = registry.validate("file_reader", {"path": "a", "pth": "b"})
    assert message == "unexpected argument 'pth' (allowed: max_chars, path)"
    assert "must be a JSON object" in (registry.validate("file_reader", [1]) or "")
    assert "unknown tool 'nope'" in (registry.validate("nope", {}) or "")


def test_execute_success(registry: ToolRegistry) -> None:
    call = {"id": "call_001", "name": "file_reader", "args": {"path": "docs/a.txt"}}
    events: list[str] = []
    message = registry.execute(call, on_event=lambda kind, payload: events.append(kind))
    assert events == ["tool_start", "tool_end"]
    assert message["role"] == "tool"
    assert message["tool_call_id"] == "call_001" and message["name"] == "file_reader"
    assert message["status"] == "success"
    assert json.loads(message["content"]) == {
        "status": "success",
        "output": {"path": "docs/a.txt", "max_chars": 2000},
        "error": None,
    }


def test_execute_accepts_json_string_args(registry: ToolRegistry) -> None:
    message = registry.execute({"id": "c", "name": "file_reader", "args": '{"path": "x"}'})
    assert _result(message)["output"]["path"] == "x"


def test_unknown_tool_lists_available(registry: ToolRegistry) -> None:
    message = registry.execute({"id": "c1", "name": "file_reeder", "args": {}})
    result = _result(message)
    assert message["status"] == "error"
    assert "unknown tool 'file_reeder'" in result["error"]
    assert "Did you mean 'file_reader'?" in result["error"]
    assert "Available tools: file_reader, failing" in result["error"]


def test_invalid_args_become_error_message(registry: ToolRegistry) -> None:
    message = registry.execute(
        {"id": "c1", "name": "file_reader", "args": {"path": "a", "max_chars": "abc"}}
    )
    assert message["status"] == "error"
    assert _result(message)["error"] == (
        "invalid arguments for tool 'file_reader': argument 'max_chars' must be integer, got 'abc'"
    )


def test_raising_tool_gives_type_and_message(registry: ToolRegistry) -> None:
    message = registry.execute({"id": "c1", "name": "failing", "args": {"x": 3}})
    assert message["status"] == "error"
    assert _result(message)["error"] == "ValueError: bad x 3"


def test_timeout_does_not_block_the_caller() -> None:
    release = threading.Event()
    finished = threading.Event()

    @tool(timeout=0.2)
    def hang() -> str:
        """Hang until released."""
        release.wait(30)
        finished.set()
        return "late"

    registry = ToolRegistry([hang])
    message = registry.execute({"id": "c1", "name": "hang", "args": {}})
    # The caller got its answer while the tool is still running in its abandoned thread.
    assert not finished.is_set()
    assert message["status"] == "error"
    assert _result(message)["error"] == "timed out after 0.2s"
    release.set()
    assert finished.wait(10)


def test_explicit_timeout_overrides_and_none_waits() -> None:
    gate = threading.Event()

    def slow() -> str:
        """Wait for the gate."""
        gate.wait(30)
        return "done"

    registry = ToolRegistry([slow])
    message = registry.execute({"id": "c", "name": "slow", "args": {}}, timeout=0.1)
    assert "timed out after 0.1s" in _result(message)["error"]
    gate.set()
    message = registry.execute({"id": "c", "name": "slow", "args": {}})  # no timeout at all
    assert _result(message)["output"] == "done"


def test_execute_many_runs_in_parallel_and_keeps_order() -> None:
    barrier = threading.Barrier(3, timeout=10)

    def meet(tag: str) -> str:
        """Wait until all three calls are running at the same time."""
        barrier.wait()  # raises BrokenBarrierError if the calls ran one after another
        return tag

    events: list[tuple[str, dict[str, Any]]] = []
    registry = ToolRegistry([meet])
    calls = [{"id": f"c{i}", "name": "meet", "args": {"tag": f"t{i}"}} for i in range(3)]
    messages = registry.execute_many(calls, on_event=lambda k, p: events.append((k, p)))
    assert [m["tool_call_id"] for m in messages] == ["c0", "c1", "c2"]
    assert [_result(m)["output"] for m in messages] == ["t0", "t1", "t2"]
    ends = {p["call_id"]: p for kind, p in events if kind == "tool_end"}
    starts = {p["call_id"]: p for kind, p in events if kind == "tool_start"}
    assert set(ends) == set(starts) == {"c0", "c1", "c2"}
    for a in ends.values():  # every pair of intervals overlaps
        for b in ends.values():
            assert a["start_perf"] < b["end_perf"] and b["start_perf"] < a["end_perf"]
    end = ends["c1"]
    assert end["name"] == "meet" and end["args"] == {"tag": "t1"}
    assert end["status"] == "success" and end["error"] is None and end["timed_out"] is False
    assert end["duration_s"] == pytest.approx(end["end_perf"] - end["start_perf"])
    assert end["start_time"] <= end["end_time"]


def test_max_workers_one_runs_sequentially() -> None:
    def work(n: int) -> int:
        """Echo."""
        return n

    events: list[tuple[str, dict[str, Any]]] = []
    registry = ToolRegistry([work])
    calls = [{"id": f"c{i}", "name": "work", "args": {"n": i}} for i in range(4)]
    registry.execute_many(calls, max_workers=1, on_event=lambda k, p: events.append((k, p)))
    intervals = sorted((p["start_perf"], p["end_perf"]) for kind, p in events if kind == "tool_end")
    for (_, first_end), (second_start, _) in itertools.pairwise(intervals):
        assert first_end <= second_start


def test_execute_many_mixed_outcomes_and_events() -> None:
    release = threading.Event()

    def ok(x: int) -> int:
        """Double."""
        return 2 * x

    def boom() -> None:
        """Fail."""
        raise RuntimeError("kaput")

    @tool(timeout=0.2)
    def stuck() -> None:
        """Hang."""
        release.wait(30)

    def bad_callback(kind: str, payload: dict[str, Any]) -> None:
        seen.append((kind, payload["call_id"], payload.get("status")))
        raise RuntimeError("callback bugs must not break tool execution")

    seen: list[tuple[str, str, Any]] = []
    registry = ToolRegistry([ok, boom, stuck])
    calls = [
        {"id": "a", "name": "ok", "args": {"x": 4}},
        {"id": "b", "name": "boom", "args": {}},
        {"id": "c", "name": "stuck", "args": {}},
        {"id": "d", "name": "missing", "args": {}},
        {"id": "e", "name": "ok", "args": {"x": "four"}},
    ]
    messages = registry.execute_many(calls, default_timeout=30, on_event=bad_callback)
    release.set()
    results = [_result(m) for m in messages]
    assert [m["tool_call_id"] for m in messages] == ["a", "b", "c", "d", "e"]
    assert results[0]["output"] == 8
    assert results[1]["error"] == "RuntimeError: kaput"
    assert results[2]["error"] == "timed out after 0.2s"
    assert results[3]["error"].startswith("unknown tool 'missing'")
    assert results[4]["error"].startswith("invalid arguments for tool 'ok'")
    for ident in "abcde":
        assert ("tool_start", ident, None) in seen
    end_status = {ident: status for kind, ident, status in seen if kind == "tool_end"}
    assert end_status == {"a": "success", "b": "error", "c": "error", "d": "error", "e": "error"}


def test_execute_many_empty() -> None:
    assert ToolRegistry().execute_many([]) == []


def test_async_tools_are_awaited_concurrently() -> None:
    @tool
    async def pause(tag: str) -> str:
        """Sleep a bit asynchronously."""
        await asyncio.sleep(0.01)
        return tag.upper()

    registry = ToolRegistry([pause])
    calls = [{"id": f"c{i}", "name": "pause", "args": {"tag": f"x{i}"}} for i in range(3)]
    messages = registry.execute_many(calls)
    assert [_result(m)["output"] for m in messages] == ["X0", "X1", "X2"]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Box(BaseModel):
    width: int
    height: int = 1


def test_outputs_become_json_data() -> None:
    def as_dataclass() -> Point:
        """Point."""
        return Point(1, 2)

    def as_model(box: Box) -> Box:
        """Echo the box (the argument arrives as a Box instance)."""
        assert isinstance(box, Box)
        return box

    def as_path() -> Path:
        """A path."""
        return Path("/tmp/x")

    def with_nan() -> dict[str, float]:
        """NaN is not JSON."""
        return {"a": float("nan"), "b": 1.0}

    registry = ToolRegistry([as_dataclass, as_model, as_path, with_nan])
    out = [
        _result(registry.execute({"id": "1", "name": "as_dataclass", "args": {}}))["output"],
        _result(registry.execute({"id": "2", "name": "as_model", "args": {"box": {"width": 3}}}))[
            "output"
        ],
        _result(registry.execute({"id": "3", "name": "as_path", "args": {}}))["output"],
        _result(registry.execute({"id": "4", "name": "with_nan", "args": {}}))["output"],
    ]
    assert out == [{"x": 1, "y": 2}, {"width": 3, "height": 1}, "/tmp/x", {"a": None, "b": 1.0}]
    message = registry.execute({"id": "5", "name": "with_nan", "args": {}})
    json.loads(message["content"], parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))


def test_calls_without_ids_get_positional_ids() -> None:
    registry = ToolRegistry([file_reader])
    messages = registry.execute_many(
        [{"name": "file_reader", "args": {"path": "a"}}, {"name": "file_reader", "args": None}]
    )
    assert [m["tool_call_id"] for m in messages] == ["call_001", "call_002"]
    assert messages[1]["status"] == "error"  # None args → {} → missing 'path'


def test_execute_many_returns_only_after_every_tool_end_is_delivered() -> None:
    """A worker marked its call finished, the waiting loop returned, and the worker's
    tool_end reached the run's subscribers after the run had ended and closed its trace
    (CI, a slow machine: "I/O operation on closed file"). Every event is out before return."""
    ended: list[str] = []

    def slow_subscriber(kind: str, payload: dict[str, Any]) -> None:
        if kind == "tool_end":
            time.sleep(0.2)  # a subscriber slower than the loop that waits for the calls
            ended.append(payload["call_id"])

    def quick(n: int) -> int:
        """Echo."""
        return n

    registry = ToolRegistry([quick])
    calls = [{"id": f"c{i}", "name": "quick", "args": {"n": i}} for i in range(3)]
    for _ in range(3):
        ended.clear()
        messages = registry.execute_many(calls, on_event=slow_subscriber)
        assert len(messages) == 3
        assert sorted(ended) == ["c0", "c1", "c2"]


def test_a_timeout_never_reports_the_end_before_the_start() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> None:
        """Hang."""
        release.wait(30)

    order: list[str] = []

    def subscriber(kind: str, payload: dict[str, Any]) -> None:
        if kind == "tool_start":
            time.sleep(0.2)  # the timeout expires while the start is being delivered
        order.append(kind)

    registry = ToolRegistry([stuck])
    messages = registry.execute_many(
        [{"id": "s", "name": "stuck", "args": {}}], on_event=subscriber
    )
    release.set()
    assert _result(messages[0])["error"] == "timed out after 0.05s"
    assert order == ["tool_start", "tool_end"]
