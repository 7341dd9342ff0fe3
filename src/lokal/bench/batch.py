"""``lokal bench``: every case file of a directory through ``generate_ai_message``.

A case file::

    {"id": "calculator", "description": "...", "messages": [...], "tools": [...]?,
     "mode": "prompt_json" | "plan_execute"?,
     "expect": {"tool_calls": [{"name": ..., "args": {...}?}], "order_matters": false}
             | {"no_tool": true} | {"content_contains": ["..."]}}

A call matches when its name is the expected one and every argument the case names matches:
strings equal up to case and surrounding spaces, numbers within floating-point error, objects
on the keys given. An argument whose meaning matters more than its text is given by a check:
``{"$value": 15.7}`` (a number, or an expression lokal's calculator evaluates to it:
``"3.14 * 5"`` and ``"5*3.14"`` pass, ``"3.14"`` does not) or ``{"$contains": ["a", "b"]}``
(a string holding each, in any case). A case with expected calls names the arguments that
decide whether the call does what was asked (tests/bench/test_bench.py checks it).

Each case runs once per profile × tool_calling mode. A record says whether a valid AIMessage
came back (``valid``) and whether it is the expected one (``correct``); the summary gives
success and correctness rates, latency mean/p50/p95 and tokens per profile × mode.

Cases run through a thread pool of ``concurrency`` workers: a server backend gets N requests
at once, in-process backends serialise on the model's lock (no gain, no harm). Records are
sorted by their job index, so the output does not depend on ``concurrency``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lokal.config import Profile
from lokal.errors import ConfigError, LokalError
from lokal.llm.backends import Backend

__all__ = ["judge", "load_cases", "percentile", "run_bench", "summarize"]

_CASE_MODES = ("prompt_json", "plan_execute")


def load_cases(directory: str | Path) -> list[dict[str, Any]]:
    """The case files of ``directory``, sorted by file name, checked for the required keys."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"cases directory {str(directory)!r} not found")
    cases = []
    for path in sorted(directory.glob("*.json")):
        try:
            case = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"case file {path} is not valid JSON: {exc}") from exc
        if not isinstance(case, dict) or not isinstance(case.get("messages"), list):
            raise ConfigError(f"case file {path} needs an object with a messages list")
        if not isinstance(case.get("expect"), dict):
            raise ConfigError(f"case file {path} needs an expect object")
        if case.get("mode", "prompt_json") not in _CASE_MODES:
            raise ConfigError(f"case file {path}: mode must be one of {_CASE_MODES}")
        case.setdefault("id", path.stem)
        cases.append(case)
    if not cases:
        raise ConfigError(f"no *.json case files in {directory}")
    return cases


def _matcher(expected: Any) -> tuple[str, Any] | None:
    """``{"$value": N}`` or ``{"$contains": [...]}``: a check of an argument's meaning rather
    than its exact text (see the module's docstring)."""
    if isinstance(expected, dict) and len(expected) == 1:
        key, value = next(iter(expected.items()))
        if key in ("$value", "$contains"):
            return key, value
    return None


def _value(actual: Any) -> float | None:
    """The number an argument stands for: a number, or an expression lokal's calculator
    evaluates (``"3.14 * 5"``, ``"5*3.14"``); None when it is neither."""
    if isinstance(actual, bool):
        return None
    if isinstance(actual, int | float):
        return float(actual)
    if not isinstance(actual, str):
        return None
    from lokal.skills.builtin import calculate

    try:
        result = calculate(actual)
    except (ValueError, TypeError, LokalError):
        return None
    return None if isinstance(result, bool) else float(result)


def _same(expected: Any, actual: Any) -> bool:
    matcher = _matcher(expected)
    if matcher is not None:
        key, wanted = matcher
        if key == "$value":
            got = _value(actual)
            return got is not None and math.isclose(got, wanted, rel_tol=1e-6, abs_tol=1e-9)
        needles = [wanted] if isinstance(wanted, str) else wanted
        return isinstance(actual, str) and all(n.casefold() in actual.casefold() for n in needles)
    if isinstance(expected, str) and isinstance(actual, str):
        return expected.strip().casefold() == actual.strip().casefold()
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(expected, actual)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and _same(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(_same, expected, actual))
    return expected == actual


def _call_matches(expected: dict[str, Any], call: dict[str, Any]) -> bool:
    if expected["name"] != call["name"]:
        return False
    args = expected.get("args") or {}
    return all(k in call["args"] and _same(v, call["args"][k]) for k, v in args.items())


def judge(expect: dict[str, Any], message: dict[str, Any] | None) -> tuple[bool, str | None]:
    """(correct, reason): does the AIMessage match the case's ``expect``?"""
    if message is None:
        return False, "no valid AIMessage"
    calls = message.get("tool_calls") or []
    content = message.get("content") or ""
    if "tool_calls" in expect:
        wanted = expect["tool_calls"]
        if len(calls) != len(wanted):
            return False, f"expected {len(wanted)} tool call(s), got {len(calls)}"
        if expect.get("order_matters"):
            for index, (w, c) in enumerate(zip(wanted, calls, strict=True)):
                if not _call_matches(w, c):
                    return False, f"call {index + 1}: expected {_describe(w)}, got {_describe(c)}"
            return True, None
        free = list(calls)
        for w in wanted:
            match = next((c for c in free if _call_matches(w, c)), None)
            if match is None:
                got = "; ".join(_describe(c) for c in free) or "none left"
                return False, f"no call matches {_describe(w)} (got {got})"
            free.remove(match)
        return True, None
    if calls:
        return False, f"expected an answer without tools, got {len(calls)} tool call(s)"
    if not content.strip():
        return False, "empty answer"
    for needle in expect.get("content_contains") or []:
        if needle.casefold() not in content.casefold():
            return False, f"answer does not contain {needle!r}"
    return True, None


def _describe(call: dict[str, Any]) -> str:
    args = json.dumps(call.get("args") or {}, ensure_ascii=False, sort_keys=True)
    return f"{call['name']}({args})"


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _record(case: dict[str, Any], profile: str, mode: str, result: dict[str, Any]) -> dict:
    message = result.get("ai_message")
    valid = result.get("status") == "success" and message is not None
    correct, reason = judge(case["expect"], message if valid else None)
    usage = result.get("usage") or {}
    error = result.get("error")
    return {
        "case": case["id"],
        "profile": profile,
        "mode": mode,
        # the tool_calling mode the decision really used (a fallback included), and how the
        # agent proceeded; the original command lines' --mode name is not either of them
        "decision_mode": result.get("tool_calling") or mode,
        "strategy": result.get("strategy"),
        "status": result.get("status", "error"),
        "valid": valid,
        "correct": correct,
        "judgement": reason,
        "latency_ms": result.get("latency_ms", 0.0),
        "prompt_tokens": usage.get("prompt_tokens") or 0,
        "completion_tokens": usage.get("completion_tokens") or 0,
        "tool_calls_count": len(message["tool_calls"]) if message else 0,
        "content_len": len(message.get("content") or "") if message else 0,
        "parse_format": (result.get("parse") or {}).get("format"),
        "retries": max(0, len(result.get("attempts") or []) - 1),
        "error": error,
        "ai_message": message,
        "raw_text": result.get("raw_text", ""),
    }


def run_bench(
    profiles: list[Profile],
    modes: list[str | None],
    cases: list[dict[str, Any]],
    tools_schema: list[dict[str, Any]],
    *,
    decision_mode: str = "prompt_json",
    concurrency: int = 1,
    progress: Callable[[], None] | None = None,
    backend: Backend | str | None = None,
) -> list[dict[str, Any]]:
    """One record per profile × mode × case, in that order whatever ``concurrency`` is.

    ``modes`` are tool_calling modes (None: the profile's own). ``decision_mode="mock"``
    runs every case on the mock backend; otherwise a case's own ``mode`` (prompt_json or
    plan_execute) is used. ``backend`` replaces every profile's backend (tests).
    """
    from lokal.llm.decide import generate_ai_message

    jobs = [(p, m, c) for p in profiles for m in modes for c in cases]
    several = len({p.name for p in profiles}) > 1

    def label(profile: Profile) -> str:
        """The row's profile: ``mock`` when the mock backend decides (``mock:NAME`` for the
        tool_calling settings of several profiles), never a model that did not run."""
        if decision_mode != "mock" or profile.backend == "mock":
            return profile.name
        return f"mock:{profile.name}" if several else "mock"

    def one(job: tuple[Profile, str | None, dict[str, Any]]) -> dict[str, Any]:
        profile, mode, case = job
        tc_profile = profile.with_tool_calling(mode=mode) if mode else profile
        tc_mode = tc_profile.tool_calling.mode
        run_mode = "mock" if decision_mode == "mock" else case.get("mode", decision_mode)
        tools = case.get("tools", tools_schema)
        try:
            result = generate_ai_message(
                tc_profile, case["messages"], tools, mode=run_mode, backend=backend
            ).to_dict()  # bench rows are JSON
        except LokalError as exc:  # a case the profile cannot run (e.g. unsupported mode)
            result = {
                "status": "error",
                "mode": run_mode,
                "error": {"type": type(exc).__name__, "message": str(exc)},
            }
        record = _record(case, label(profile), tc_mode, result)
        if progress:
            progress()
        return record

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, jobs))


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per profile × mode: success and correctness rates, latency and token statistics."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(f"{record['profile']}/{record['mode']}", []).append(record)
    out = {}
    for key, group in groups.items():
        n = len(group)
        latencies = [r["latency_ms"] for r in group]
        prompt = sum(r["prompt_tokens"] for r in group)
        completion = sum(r["completion_tokens"] for r in group)
        out[key] = {
            "profile": group[0]["profile"],
            "mode": group[0]["mode"],
            "cases": n,
            "success": sum(r["valid"] for r in group),
            "correct": sum(r["correct"] for r in group),
            "success_rate": round(100 * sum(r["valid"] for r in group) / n, 1),
            "correct_rate": round(100 * sum(r["correct"] for r in group) / n, 1),
            "latency_ms_mean": round(sum(latencies) / n, 1),
            "latency_ms_p50": round(percentile(latencies, 50), 1),
            "latency_ms_p95": round(percentile(latencies, 95), 1),
            "prompt_tokens_total": prompt,
            "completion_tokens_total": completion,
            "prompt_tokens_mean": round(prompt / n, 1),
            "completion_tokens_mean": round(completion / n, 1),
            "retries_total": sum(r["retries"] for r in group),
        }
    return out
