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
from lokal.tools.schema import ToolSpec

__all__ = [
    "build_prompt_messages",
    "load_template",
    "render_history",
    "tool_result_reminder",
    "tools_block",
]

# No value worth copying: tiny models copy "<your answer>" verbatim (and a concrete example
# answer too); a reply that does is caught by lokal.llm.quality all the same.
ANSWER_FORM = '{"content": "...your answer, written out...", "tool_calls": []}'
CONSTRAINED_ANSWER_FORM = '{"content": "...your answer, written out..."}'


@cache
def load_template(name: str) -> str:
    """The text of ``templates/<name>.txt`` shipped with the package."""
    return resources.files("lokal.llm").joinpath("templates", f"{name}.txt").read_text("utf-8")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# Generic on purpose: tiny models copy concrete example arguments into their calls.
CALL_FORM = '{"content": "", "tool_calls": [{"name": "<tool name>", "args": {<arguments>}}]}'


def tools_block(tools: list[ToolSpec]) -> str:
    """The tools schema as the prompt shows it (flat form, one JSON list)."""
    return "Available tools:\n" + _dumps([tool.to_flat() for tool in tools])


def _type_of(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "any"
    if isinstance(spec.get("enum"), list):
        return "|".join(_dumps(v) for v in spec["enum"][:8])
    kind = spec.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"list of {_type_of(spec['items'])}"
    return str(kind or "any")


def _first_sentence(text: str, limit: int = 160) -> str:
    line = " ".join(str(text or "").split())
    for end in (". ", "。"):
        if end in line:
            line = line[: line.index(end) + len(end)].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tool_lines(tools: list[ToolSpec]) -> str:
    """One line per tool, ``- name(param: type, optional?: type): first sentence``: the short
    listing of the staged prompt (its grammar carries the full schemas)."""
    lines = []
    for tool in tools:
        required = set(tool.required)
        params = [
            f"{name}{'' if name in required else '?'}: {_type_of(spec)}"
            for name, spec in tool.properties.items()
        ]
        lines.append(f"- {tool.name}({', '.join(params)}): {_first_sentence(tool.description)}")
    return "\n".join(lines)


STAGED_PLAN_NOTE = (
    "Plan first: call every tool the request needs at once, in the order they should run."
)


def _fill(name: str, tools: list[ToolSpec], constrained: bool) -> str:
    text = Template(load_template(name)).safe_substitute(
        answer_form=CONSTRAINED_ANSWER_FORM if constrained else ANSWER_FORM,
        call_form=CALL_FORM.replace('"content": "", ', "") if constrained else CALL_FORM,
    )
    return text.rstrip() + "\n\n" + tools_block(tools)


def _results_message(tool_messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool results as one user message, ``Result of <tool>: <output JSON>`` per line (the
    staged prompt: a chat model that never saw a ``tool`` role reads a user turn)."""
    lines = []
    for message in tool_messages:
        result = read_tool_result(message)
        name = message.get("name", "tool")
        output = result["output"]
        if (
            result["status"] == "success"
            and isinstance(output, dict)
            and output.get("repeated_call")
        ):
            lines.append(f"Result of {name} (as before): {_dumps(output.get('earlier_result'))}")
        elif result["status"] == "success":
            lines.append(f"Result of {name}: {_dumps(output)}")
        else:
            lines.append(f"{name} failed: {result['error']}")
    return {"role": "user", "content": "\n".join(lines)}


def render_history(
    messages: list[dict[str, Any]], *, native: bool, results_as_user: bool = False
) -> list[dict[str, Any]]:
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
        elif role == "tool" and results_as_user:
            if rendered and rendered[-1].get("tool_results"):
                rendered[-1]["tool_results"].append(message)
            else:
                rendered.append({"role": "user", "tool_results": [message]})
        elif role == "tool":
            entry = {"role": "tool", "content": str(message.get("content") or "")}
            if native:
                entry["tool_call_id"] = message.get("tool_call_id", "")
                entry["name"] = message.get("name", "")
            rendered.append(entry)
        else:
            rendered.append({"role": role, "content": str(message.get("content") or "")})
    return [_results_message(m["tool_results"]) if "tool_results" in m else m for m in rendered]


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


EVIDENCE_LABEL = "Most relevant:"
REPEAT_NOTE = (
    "This call was already made in this run; its earlier result is above. "
    "Answer from it instead of calling again."
)
CORRECTIVE = "Your previous reply could not be used: {error}. {how}"


def instruction_texts() -> list[str]:
    """Every text lokal itself writes into prompts (templates, reminders, notes): a reply
    that copies one of their sentences is not an answer (``lokal.llm.quality``)."""
    texts = [
        load_template(name) for name in ("final", "plan", "prompt_json", "step", "staged", "social")
    ]
    texts += [
        tool_result_reminder([{"role": "tool", "name": "x", "content": ""}] * 2),
        STAGED_PLAN_NOTE,
        REPEAT_NOTE,
        CORRECTIVE,
    ]
    return texts


def build_prompt_messages(
    messages: list[dict[str, Any]],
    tools: list[ToolSpec],
    *,
    mode: str = "prompt_json",
    purpose: str = "decide",
    evidence: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Prompt messages for one decision.

    ``mode`` is the tool_calling mode; ``purpose`` is ``decide``, ``plan``, ``step`` or
    ``final``. In builtin mode the tools go to the chat template, so no schema is injected.
    In staged mode tool results are user turns (``Result of <tool>: ...``), followed by
    ``evidence``: the passages of the latest results that match the question best (chosen
    by ``lokal.llm.evidence.evidence``); no instruction text follows them, since tiny models
    copy such text into their answers.
    """
    constrained = mode in ("constrained", "staged")
    native = mode == "builtin"
    staged = mode == "staged"
    user_system = [m["content"] for m in messages if m.get("role") == "system" and m.get("content")]
    history = render_history(
        [m for m in messages if m.get("role") != "system"], native=native, results_as_user=staged
    )
    if purpose == "final":
        instructions = load_template("final")
    elif native:
        instructions = ""
    elif mode == "staged":
        instructions = Template(load_template("staged")).safe_substitute(
            tool_lines=tool_lines(tools) or "(none)"
        )
        if purpose == "plan":
            instructions += "\n" + STAGED_PLAN_NOTE
    elif purpose == "plan":
        instructions = _fill("plan", tools, constrained)
    elif purpose == "step":
        instructions = _fill("step", tools, constrained)
    else:
        instructions = _fill("prompt_json", tools, constrained)
    system = "\n\n".join(part for part in [instructions, *user_system] if part)
    prompt = ([{"role": "system", "content": system}] if system else []) + history
    trailing = trailing_tool_messages(messages)
    if trailing and staged and evidence:
        # the passages of the results closest to the question, where the answer is written
        last = prompt[-1]
        note = "\n".join(f"{EVIDENCE_LABEL} {e}" for e in evidence)
        prompt[-1] = {**last, "content": f"{last['content']}\n{note}"}
    elif trailing and purpose != "final" and not native and not staged:
        prompt.append(
            {"role": "user", "content": tool_result_reminder(trailing, constrained=constrained)}
        )
    return prompt


def fallback_tools_system(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Messages with the tools (OpenAI form, as backends receive them) stated in the Hermes
    style, for chat templates that ignore ``tools=`` (builtin mode on such a model still gets
    a native-looking tool format)."""
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
