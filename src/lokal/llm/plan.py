"""Plan-and-execute: reading a plan reply.

The plan prompt asks for ``{"reasoning", "plan": [{"step", "description", "tool_call"}]}``.
Three shapes are accepted, as in the original scripts: the full plan, a bare list of steps,
and a plain AIMessage (the model skipped planning). The plan's calls become the AIMessage's
tool_calls, in step order; the plan itself is kept in the result record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lokal.errors import ParseError
from lokal.llm.parser import (
    coerce_args,
    decode_arguments,
    extract_json_values,
    parse_model_output,
    resolve_tool_name,
)
from lokal.messages import make_ai_message
from lokal.tools.schema import ToolSpec, tool_specs

__all__ = ["parse_plan_output"]


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    key = next((key for key in ("args", "arguments", "parameters") if key in call), None)
    try:
        return decode_arguments(call[key] if key else None)[0]
    except ValueError as exc:
        raise ParseError(f"plan step {exc}", kind="invalid_arguments") from None


def _steps_to_calls(
    steps: list[Any], tools: Mapping[str, ToolSpec]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    for position, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            raise ParseError(f"plan step {position} is not an object", kind="not_a_call")
        call = step.get("tool_call")
        if call is None and "name" in step:
            call = step  # a step written as a bare call
        if not isinstance(call, dict):
            continue  # a descriptive step with no tool
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ParseError(
                f"plan step {position} has a tool_call without a name", kind="not_a_call"
            )
        args = _arguments(call)
        if tools:
            name = resolve_tool_name(name, tools)
            args = coerce_args(args, tools[name].parameters)
        calls.append({"id": call.get("id"), "name": name, "args": args})
        kept.append(
            {
                "step": step.get("step", position),
                "description": str(step.get("description") or ""),
                "tool_call": {"name": name, "args": args},
            }
        )
    return calls, kept


def parse_plan_output(
    text: str,
    tools_schema: Any = None,
    *,
    conflict_policy: str = "tool_calls",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The AIMessage and the plan record read from a plan reply; raise ParseError."""
    specs = tool_specs(tools_schema)  # converted once, here; parse_model_output keeps them
    tools = {spec.name: spec for spec in specs}
    for value, repaired in extract_json_values(text):
        steps = None
        reasoning = ""
        shape = None
        if isinstance(value, dict) and isinstance(value.get("plan"), list):
            steps, reasoning, shape = value["plan"], str(value.get("reasoning") or ""), "plan"
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(s, dict) and ("tool_call" in s or "step" in s) for s in value)
        ):
            steps, shape = value, "plan_list"
        if steps is None:
            continue
        calls, kept = _steps_to_calls(steps, tools)
        if not calls:
            raise ParseError("the plan has no step with a tool call", kind="not_a_call")
        record = {
            "format": shape,
            "repaired": repaired,
            "reasoning": reasoning,
            "steps": kept,
            "total_steps": len(kept),
        }
        return make_ai_message("", calls), record
    # Not a plan: a plain AIMessage (answer or calls) passes through.
    result = parse_model_output(text, specs, conflict_policy=conflict_policy)
    return result.message, {
        "format": result.format,
        "repaired": result.repaired,
        "reasoning": "",
        "steps": [],
        "total_steps": 0,
    }
