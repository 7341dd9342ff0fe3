"""Prompt building: system prompts from template files, history rendering, reminders.

The rendered history must stay byte-identical from turn to turn (same JSON key order, same
separators, no timestamps), or a backend's prefix cache silently does nothing: everything
here is a pure function of the messages and the tools.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from lokal.messages import read_tool_result

__all__ = [
    "build_prompt_messages",
    "load_template",
    "render_history",
    "tool_result_reminder",
    "tools_block",
]

ANSWER_FORM = '{"content": "<your answer>", "tool_calls": []}'
CONSTRAINED_ANSWER_FORM = '{"content": "<your answer>"}'


@cache
def load_template(name: str) -> str:
    """The text of ``templates/<name>.txt`` shipped with the package."""
    return resources.files("lokal.llm").joinpath("templates", f"{name}.txt").read_text("utf-8")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# Generic on purpose: tiny models copy concrete example arguments into their calls.
CALL_FORM = '{"content": "", "tool_calls": [{"name": "<tool name>", "args": {<arguments>}}]}'


def tools_block(tools: list[dict[str, Any]]) -> str:
    """The tools schema as the prompt shows it (flat form, one JSON list)."""
    return "Available tools:\n" + _dumps(tools)


def _fill(name: str, tools: list[dict[str, Any]], constrained: bool) -> str:
    text = Template(load_template(name)).safe_substitute(
        answer_form=CONSTRAINED_ANSWER_FORM if constrained else ANSWER_FORM,
        call_form=CALL_FORM.replace('"content": "", ', "") if constrained else CALL_FORM,
    )
    return text.rstrip() + "\n\n" + tools_block(tools)


def render_history(messages: list[dict[str, Any]], *, native: bool) -> list[dict[str, Any]]:
    """The conversation as chat-template messages.

    ``native=False`` (prompt_json, constrained, plan): an assistant tool turn is shown as the
    JSON envelope the model is asked to write, so its own history teaches the format.
    ``native=True`` (builtin): assistant turns carry ``tool_calls`` in the form chat templates
    read (``function.arguments`` as an object).
    """
    rendered: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            calls = [
                {"name": c["name"], "args": c.get("args") or {}} for c in message["tool_calls"]
            ]
            if native:
                rendered.append(
                    {
                        "role": "assistant",
                        "content": message.get("content") or "",
                        "tool_calls": [
                            {
                                "id": c.get("id"),
                                "type": "function",
                                "function": {"name": c["name"], "arguments": c.get("args") or {}},
                            }
                            for c in message["tool_calls"]
                        ],
                    }
                )
            else:
                rendered.append({"role": "assistant", "content": _dumps({"tool_calls": calls})})
        elif role == "tool":
            entry = {"role": "tool", "content": str(message.get("content") or "")}
            if native:
                entry["tool_call_id"] = message.get("tool_call_id", "")
                entry["name"] = message.get("name", "")
            rendered.append(entry)
        else:
            rendered.append({"role": role, "content": str(message.get("content") or "")})
    return rendered


def trailing_tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ToolMessages at the end of ``messages`` (the results the model has not seen)."""
    trailing: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        trailing.append(message)
    return list(reversed(trailing))


def tool_result_reminder(tool_messages: list[dict[str, Any]], *, constrained: bool = False) -> str:
    """The user-turn reminder after ToolMessages: how many results arrived, what to do next."""
    count = len(tool_messages)
    answer = CONSTRAINED_ANSWER_FORM if constrained else ANSWER_FORM
    failed = [
        m.get("name", "?") for m in tool_messages if read_tool_result(m)["status"] != "success"
    ]
    parts = [
        f"The last {count} ToolMessage(s) contain tool results.",
        f"If they provide the requested information, answer now with {answer}.",
        "Do not repeat the completed tool calls.",
    ]
    if failed:
        parts.append(f"These tools failed: {', '.join(failed)}; fix the arguments or explain.")
    if any(m.get("name") == "read_skill" for m in tool_messages):
        parts.append(
            "You have read a skill's instructions. Its scripts run only through the "
            "code_execution tool, e.g. "
            '{"name": "code_execution", "args": {"command": "python scripts/<script>.py ..."}}; '
            "call it now unless you already have the answer."
        )
    return " ".join(parts)


def build_prompt_messages(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    mode: str = "prompt_json",
    purpose: str = "decide",
) -> list[dict[str, Any]]:
    """Prompt messages for one decision.

    ``mode`` is the tool_calling mode; ``purpose`` is ``decide``, ``plan``, ``step`` or
    ``final``. In builtin mode the tools go to the chat template, so no schema is injected.
    """
    constrained = mode == "constrained"
    native = mode == "builtin"
    user_system = [m["content"] for m in messages if m.get("role") == "system" and m.get("content")]
    history = render_history([m for m in messages if m.get("role") != "system"], native=native)
    if purpose == "final":
        instructions = load_template("final")
    elif native:
        instructions = ""
    elif purpose == "plan":
        instructions = _fill("plan", tools, constrained)
    elif purpose == "step":
        instructions = _fill("step", tools, constrained)
    else:
        instructions = _fill("prompt_json", tools, constrained)
    system = "\n\n".join(part for part in [instructions, *user_system] if part)
    prompt = ([{"role": "system", "content": system}] if system else []) + history
    trailing = trailing_tool_messages(messages)
    if trailing and purpose != "final" and not native:
        prompt.append(
            {"role": "user", "content": tool_result_reminder(trailing, constrained=constrained)}
        )
    return prompt


def fallback_tools_system(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Messages with the tools stated in the Hermes style, for chat templates that ignore
    ``tools=`` (builtin mode on such a model still gets a native-looking tool format)."""
    listing = "\n".join(_dumps(tool) for tool in tools)
    block = (
        "You can call functions. They are listed inside <tools></tools>:\n"
        f"<tools>\n{listing}\n</tools>\n"
        "To call functions, reply with one block per call and nothing else:\n"
        '<tool_call>\n{"name": <function name>, "arguments": <arguments object>}\n</tool_call>\n'
        "If no function is needed, answer in plain text."
    )
    if messages and messages[0].get("role") == "system":
        first = {**messages[0], "content": block + "\n\n" + str(messages[0].get("content") or "")}
        return [first, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]


def fit_messages(
    messages: list[dict[str, Any]],
    count_tokens: Any,
    budget: int,
) -> tuple[list[dict[str, Any]], int]:
    """Drop the oldest turns until ``count_tokens(messages) <= budget``.

    Only messages before the last user message are dropped (never the system prompt, the
    last user message or the current turn's tool results); an assistant tool turn goes
    together with the ToolMessages that answer it. Returns the kept messages and how
    many were dropped; when even the protected messages do not fit, they are returned as
    they are and the backend reports the overflow.
    """
    kept = list(messages)
    dropped = 0
    last_user = max((i for i, m in enumerate(kept) if m.get("role") == "user"), default=-1)
    while count_tokens(kept) > budget:
        index = next((i for i, m in enumerate(kept) if m.get("role") != "system"), None)
        if index is None or index >= last_user:
            break
        end = index + 1
        if kept[index].get("role") == "assistant":
            while end < len(kept) and kept[end].get("role") == "tool":
                end += 1
        removed = end - index
        del kept[index:end]
        dropped += removed
        if last_user >= index:
            last_user -= removed
    return kept, dropped
